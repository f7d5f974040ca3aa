import { Either } from "effect"
import { useEffect, useMemo, useState } from "react"
import type { SearchResult } from "../../../../domain/Search.ts"
import type { ApiCallError } from "../../api/client.ts"
import { formatCost, formatDuration, formatTime } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { Link, navigate } from "../../shell/router.tsx"
import { useRunCall } from "../../shell/useApi.ts"
import { SEARCH_FILTER_KEYS, searchRequest } from "./searchQuery.ts"

const snippet = (value: unknown) => {
  if (value === undefined) return ""
  const text = typeof value === "string" ? value : JSON.stringify(value)
  return text.length > 240 ? `${text.slice(0, 240)}…` : text
}

const FILTER_LABELS: Record<(typeof SEARCH_FILTER_KEYS)[number], string> = {
  span_type: "Span type",
  status: "Trace status",
  model: "Model",
  project_id: "Project",
  date_from: "Started after (ISO)",
  date_to: "Started before (ISO)",
  min_cost: "Min cost ($)",
  min_duration_ms: "Min duration (ms)"
}

/** Semantic span search (`?q=` and the API's filters), each hit linking to the span in its trace. */
export const SearchPage = (props: PageProps) => {
  const request = useMemo(() => searchRequest(props.search), [props.search.toString()])
  const run = useRunCall()
  const [state, setState] = useState<{
    hits?: (typeof SearchResult.Type)["spans"] | undefined
    error?: string | undefined
    loading: boolean
  }>({ loading: false })

  useEffect(() => {
    if (Either.isLeft(request)) return setState({ loading: false, error: request.left })
    if (request.right === undefined) return setState({ loading: false })
    const abort = new AbortController()
    setState((s) => ({ ...s, loading: true, error: undefined }))
    const payload = request.right
    run((client) => client.search.search({ payload }), abort.signal).then(
      (result) => !abort.signal.aborted && setState({ hits: result.spans, loading: false }),
      (error: ApiCallError) => !abort.signal.aborted && setState({ error: error.message, loading: false })
    )
    return () => abort.abort()
  }, [request, run])

  const setParam = (key: string, value: string) => {
    const search = new URLSearchParams(props.search)
    if (value.trim() === "") search.delete(key)
    else search.set(key, value)
    navigate(`/ui/search?${search.toString()}`, { replace: true })
  }

  return (
    <section className="page">
      <div className="page-title">
        <h1>Search</h1>
        {props.search.get("q") && <span className="muted">spans like “{props.search.get("q")}”</span>}
      </div>
      <form className="filterbar" aria-label="Search filters" onSubmit={(e) => e.preventDefault()}>
        {SEARCH_FILTER_KEYS.map((key) => (
          <label key={key} className="filter">
            <span>{FILTER_LABELS[key]}</span>
            {key === "span_type" ? (
              <select value={props.search.get(key) ?? ""} onChange={(e) => setParam(key, e.target.value)}>
                {["", "llm_call", "tool_call", "tool_result", "reasoning", "action", "error", "fork_point"].map((t) => (
                  <option key={t} value={t}>
                    {t || "any"}
                  </option>
                ))}
              </select>
            ) : key === "status" ? (
              <select value={props.search.get(key) ?? ""} onChange={(e) => setParam(key, e.target.value)}>
                {["", "running", "completed", "failed"].map((t) => (
                  <option key={t} value={t}>
                    {t || "any"}
                  </option>
                ))}
              </select>
            ) : (
              <input
                defaultValue={props.search.get(key) ?? ""}
                onBlur={(e) => setParam(key, e.target.value)}
                size={12}
              />
            )}
          </label>
        ))}
      </form>
      {state.error !== undefined && (
        <p role="alert" className="error-text">
          {state.error}
        </p>
      )}
      {Either.isRight(request) && request.right === undefined && (
        <p className="muted empty-note">
          Type in the search box above: spans are ranked by meaning, not only by words.
        </p>
      )}
      {state.loading && <p className="muted">Searching…</p>}
      {state.hits !== undefined && state.hits.length === 0 && !state.loading && (
        <p className="muted empty-note">No span matches.</p>
      )}
      {state.hits !== undefined && state.hits.length > 0 && (
        <ul className="search-results" aria-label="Search results">
          {state.hits.map((hit) => (
            <li key={hit.id}>
              <div>
                <span className={`type type-${hit.span_type}`}>{hit.span_type}</span>{" "}
                {hit.trace_id !== undefined ? (
                  <Link href={`/ui/traces/${hit.trace_id}?span=${hit.id}`}>{hit.name}</Link>
                ) : (
                  <span>{hit.name}</span>
                )}
                <span className="muted">
                  {" "}
                  · {formatTime(hit.started_at)}
                  {hit.model !== undefined ? ` · ${hit.model}` : ""}
                  {hit.duration_ms !== undefined ? ` · ${formatDuration(hit.duration_ms)}` : ""}
                  {hit.cost !== undefined ? ` · ${formatCost(hit.cost)}` : ""}
                  {hit.similarity !== undefined ? ` · similarity ${hit.similarity.toFixed(2)}` : ""}
                </span>
              </div>
              <div className="snippet mono">{snippet(hit.input ?? hit.output)}</div>
            </li>
          ))}
        </ul>
      )}
    </section>
  )
}
