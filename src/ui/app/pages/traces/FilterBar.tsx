import { useEffect, useState } from "react"
import type { FilterKey, TraceFilters } from "./traceFilters.ts"

/** `2026-11-26T14:00` (a datetime-local value, the browser's zone) from an ISO instant, and back. */
const toLocalInput = (iso: string | undefined) => {
  if (iso === undefined) return ""
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return ""
  const pad = (n: number) => String(n).padStart(2, "0")
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`
}
const fromLocalInput = (value: string) => (value === "" ? "" : new Date(value).toISOString())

const TEXT_FIELDS: ReadonlyArray<readonly [FilterKey, string, string]> = [
  ["name", "Name contains", "checkout"],
  ["project_id", "Project", "project uuid"],
  ["session_id", "Session", "session id"],
  ["model", "Model", "gpt-4o"],
  ["min_cost", "Min cost ($)", "0.01"],
  ["min_duration_ms", "Min duration (ms)", "1000"]
]

/** The list's filters as a form; text fields apply after a pause in typing, the others at once. */
export const FilterBar = (props: {
  readonly filters: TraceFilters
  readonly onChange: (filters: TraceFilters) => void
}) => {
  const [draft, setDraft] = useState(props.filters)
  useEffect(() => setDraft(props.filters), [props.filters])
  useEffect(() => {
    const same = JSON.stringify(draft) === JSON.stringify(props.filters)
    if (same) return
    const timer = setTimeout(() => props.onChange(draft), 350)
    return () => clearTimeout(timer)
    // eslint-disable-next-line react-hooks/exhaustive-deps -- apply the draft once typing pauses
  }, [draft])
  const set = (key: FilterKey, value: string, now = false) => {
    const next = { ...draft, [key]: value }
    if (value === "") delete next[key]
    setDraft(next)
    if (now) props.onChange(next)
  }
  const select = (key: FilterKey, label: string, options: ReadonlyArray<readonly [string, string]>) => (
    <label className="filter">
      <span>{label}</span>
      <select value={draft[key] ?? ""} onChange={(e) => set(key, e.target.value, true)}>
        {options.map(([value, text]) => (
          <option key={value} value={value}>
            {text}
          </option>
        ))}
      </select>
    </label>
  )
  const count = Object.keys(props.filters).length
  return (
    <form
      className="filterbar"
      aria-label="Filters"
      onSubmit={(e) => {
        e.preventDefault()
        props.onChange(draft)
      }}
    >
      {select("status", "Status", [
        ["", "any"],
        ["running", "running"],
        ["completed", "completed"],
        ["failed", "failed"]
      ])}
      {select("environment", "Environment", [
        ["", "production"],
        ["sandbox", "sandbox"]
      ])}
      {select("has_error", "Errors", [
        ["", "any"],
        ["true", "with errors"],
        ["false", "without errors"]
      ])}
      {TEXT_FIELDS.map(([key, label, placeholder]) => (
        <label key={key} className="filter">
          <span>{label}</span>
          <input
            value={draft[key] ?? ""}
            placeholder={placeholder}
            onChange={(e) => set(key, e.target.value)}
            size={key === "name" ? 14 : 10}
          />
        </label>
      ))}
      <label className="filter">
        <span>Started after</span>
        <input
          type="datetime-local"
          value={toLocalInput(draft.date_from)}
          onChange={(e) => set("date_from", fromLocalInput(e.target.value), true)}
        />
      </label>
      <label className="filter">
        <span>Started before</span>
        <input
          type="datetime-local"
          value={toLocalInput(draft.date_to)}
          onChange={(e) => set("date_to", fromLocalInput(e.target.value), true)}
        />
      </label>
      {count > 0 && (
        <button type="button" className="quiet" onClick={() => props.onChange({})}>
          Clear filters ({count})
        </button>
      )}
    </form>
  )
}
