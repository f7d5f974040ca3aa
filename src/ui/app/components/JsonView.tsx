import { useState } from "react"

/** Strings longer than this are cut, with a control to show the rest. */
const LONG_TEXT = 2000
/** Arrays and objects with more entries than this show the first ones and a control for the rest. */
const MANY_ENTRIES = 200

const LongText = (props: { readonly text: string }) => {
  const [all, setAll] = useState(false)
  if (props.text.length <= LONG_TEXT || all) return <span className="json-string">{JSON.stringify(props.text)}</span>
  return (
    <span className="json-string">
      {JSON.stringify(props.text.slice(0, LONG_TEXT))}…{" "}
      <button type="button" className="link" onClick={() => setAll(true)}>
        show all {props.text.length.toLocaleString()} characters
      </button>
    </span>
  )
}

const Scalar = (props: { readonly value: unknown }) => {
  const { value } = props
  if (typeof value === "string") return <LongText text={value} />
  if (typeof value === "number" || typeof value === "bigint")
    return <span className="json-number">{String(value)}</span>
  if (typeof value === "boolean") return <span className="json-bool">{String(value)}</span>
  if (value === null || value === undefined) return <span className="json-null">null</span>
  return <span>{String(value)}</span>
}

const Node = (props: {
  readonly label?: string | undefined
  readonly value: unknown
  readonly depth: number
  readonly open: number
}) => {
  const { value, depth } = props
  const [more, setMore] = useState(false)
  const label = props.label === undefined ? null : <span className="json-key">{props.label}: </span>
  if (value === null || typeof value !== "object") {
    return (
      <div className="json-row">
        {label}
        <Scalar value={value} />
      </div>
    )
  }
  const entries: Array<[string, unknown]> = Array.isArray(value)
    ? value.map((v, i) => [String(i), v])
    : Object.entries(value)
  const brackets = Array.isArray(value) ? ["[", "]"] : ["{", "}"]
  if (entries.length === 0)
    return (
      <div className="json-row">
        {label}
        {brackets.join("")}
      </div>
    )
  const shown = more ? entries : entries.slice(0, MANY_ENTRIES)
  return (
    <details className="json-node" open={depth < props.open}>
      <summary>
        {label}
        <span className="muted">
          {brackets[0]}
          {entries.length} {Array.isArray(value) ? "items" : "keys"}
          {brackets[1]}
        </span>
      </summary>
      <div className="json-children">
        {shown.map(([key, child]) => (
          <Node key={key} label={key} value={child} depth={depth + 1} open={props.open} />
        ))}
        {shown.length < entries.length && (
          <button type="button" className="link" onClick={() => setMore(true)}>
            show {entries.length - shown.length} more
          </button>
        )}
      </div>
    </details>
  )
}

/** JSON as a collapsible tree: objects and arrays open down to `open` levels, long strings cut. */
export const JsonView = (props: { readonly value: unknown; readonly open?: number; readonly label?: string }) => (
  <div className="json" aria-label={props.label}>
    <Node value={props.value} depth={0} open={props.open ?? 2} />
  </div>
)
