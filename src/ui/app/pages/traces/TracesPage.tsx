import { Either, Schema } from "effect"
import { useCallback, useEffect, useMemo, useRef, useState } from "react"
import { TOTAL_CAP, type Trace, TraceList } from "../../../../domain/Trace.ts"
import { ApiCallError } from "../../api/client.ts"
import { firstRequestUrl, LIST_PAGE, takePrefetched } from "../../api/prefetch.ts"
import type { LiveEvent } from "../../api/stream.ts"
import { StatusBadge } from "../../components/StatusBadge.tsx"
import { formatCost, formatCount, formatDuration, formatTime } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { Link, navigate } from "../../shell/router.tsx"
import { useSession } from "../../shell/session.tsx"
import { useRunCall } from "../../shell/useApi.ts"
import { useLive } from "../../shell/useLive.ts"
import { FilterBar } from "./FilterBar.tsx"
import { filtersFromSearch, filtersToSearch, listParams, matchesFilters, type TraceFilters } from "./traceFilters.ts"

const PAGE = LIST_PAGE

const decodeList = Schema.decodeUnknownPromise(TraceList)

/** The prefetched first page, decoded by the contract's schema; an error body becomes the call's error. */
const readPrefetched = async (response: Response) => {
  const body = (await response.json()) as unknown
  if (response.ok) return decodeList(body)
  const error = body as { error?: string; code?: string }
  throw new ApiCallError(error.code ?? "http", error.error ?? `HTTP ${response.status}`, response.status)
}

interface ListState {
  readonly items: ReadonlyArray<Trace>
  readonly nextCursor: string | undefined
  readonly total: number | undefined
  readonly loading: boolean
  readonly error: string | undefined
}

const empty: ListState = { items: [], nextCursor: undefined, total: undefined, loading: true, error: undefined }

/** The account's traces, newest first, filtered by the URL's query, growing by cursor and by live arrivals. */
export const TracesPage = (props: PageProps) => {
  const filters = useMemo(() => filtersFromSearch(props.search), [props.search.toString()])
  const filterKey = filtersToSearch(filters)
  const params = useMemo(() => listParams(filters, { limit: PAGE }), [filterKey])
  const run = useRunCall()
  const { key, signOut } = useSession()
  const [state, setState] = useState<ListState>(empty)
  const [reloads, setReloads] = useState(0)
  const loadingMore = useRef(false)

  const setFilters = (next: TraceFilters) => {
    const search = filtersToSearch(next)
    navigate(`/ui/traces${search === "" ? "" : `?${search}`}`, { replace: true })
  }

  useEffect(() => {
    if (Either.isLeft(params)) return setState({ ...empty, loading: false, error: params.left })
    const abort = new AbortController()
    setState((s) => ({ ...s, loading: true, error: undefined }))
    // The first page may already be on its way (sent by the prefetch script while the bundle loaded).
    const prefetched = takePrefetched(firstRequestUrl("/ui/traces", props.search) ?? "", key)
    const first =
      prefetched === undefined
        ? run((client) => client.traces.list({ urlParams: params.right }), abort.signal)
        : prefetched.then(readPrefetched).catch((error: ApiCallError) => {
            if (error.code === "unauthorized") signOut("Your key is no longer accepted. Sign in again.")
            throw error
          })
    first.then(
      (page) =>
        !abort.signal.aborted &&
        setState({
          items: page.items,
          nextCursor: page.hasMore ? page.nextCursor : undefined,
          total: page.total,
          loading: false,
          error: undefined
        }),
      (error: Error) => !abort.signal.aborted && setState({ ...empty, loading: false, error: error.message })
    )
    return () => abort.abort()
    // eslint-disable-next-line react-hooks/exhaustive-deps -- the filters are in `params`
  }, [params, run, reloads, key, signOut])

  const loadMore = useCallback(() => {
    if (loadingMore.current || state.nextCursor === undefined || Either.isLeft(params)) return
    const cursor = state.nextCursor
    const next = listParams(filters, { limit: PAGE, cursor })
    if (Either.isLeft(next)) return
    loadingMore.current = true
    run((client) => client.traces.list({ urlParams: next.right })).then(
      (page) => {
        setState((s) => {
          if (s.nextCursor !== cursor) return s
          const known = new Set(s.items.map((t) => t.id))
          return {
            ...s,
            items: [...s.items, ...page.items.filter((t) => !known.has(t.id))],
            nextCursor: page.hasMore ? page.nextCursor : undefined
          }
        })
        loadingMore.current = false
      },
      (error: Error) => {
        setState((s) => ({ ...s, error: error.message }))
        loadingMore.current = false
      }
    )
  }, [state.nextCursor, params, filters, run])

  // Infinite scroll: the next page loads when the end of the list comes into view.
  const sentinel = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const element = sentinel.current
    if (element === null) return
    const observer = new IntersectionObserver((entries) => entries.some((e) => e.isIntersecting) && loadMore(), {
      rootMargin: "400px"
    })
    observer.observe(element)
    return () => observer.disconnect()
  }, [loadMore])

  // Live arrivals: a new trace that matches goes on top; a changed one is updated in place; when the filters
  // depend on spans (model, errors), the first page is read again instead.
  const onLive = (events: ReadonlyArray<LiveEvent>) => {
    if (Either.isLeft(params)) return
    let reread = false
    setState((s) => {
      let items = s.items.slice()
      let total = s.total
      for (const event of events) {
        if (event.type !== "trace") continue
        const index = items.findIndex((t) => t.id === event.traceId)
        if (event.event === "deleted") {
          if (index >= 0) items.splice(index, 1)
          continue
        }
        if (event.trace === undefined) continue
        const matches = matchesFilters(event.trace, params.right)
        if (matches === undefined) reread = true
        else if (index >= 0) items[index] = event.trace
        else if (matches && event.event !== "deleted") {
          items = [event.trace, ...items]
          // A capped total stays "more than" the cap.
          total = total === undefined || total > TOTAL_CAP ? total : total + 1
        }
      }
      return { ...s, items, total }
    })
    if (reread) setReloads((n) => n + 1)
  }
  const live = useLive(
    {
      ...(filters.project_id === undefined ? {} : { project_id: filters.project_id }),
      ...(filters.session_id === undefined ? {} : { session_id: filters.session_id })
    },
    onLive
  )

  return (
    <section className="page traces-page">
      <div className="page-title">
        <h1>Traces</h1>
        <span className="muted">
          {state.total === undefined
            ? ""
            : state.total > TOTAL_CAP
              ? `more than ${formatCount(TOTAL_CAP)} traces`
              : `${formatCount(state.total)} traces`}
        </span>
        <span role="status" className={`live live-${live}`}>
          {live === "live" ? "Live" : live === "closed" ? "Offline" : "Connecting…"}
        </span>
      </div>
      <FilterBar filters={filters} onChange={setFilters} />
      {state.error !== undefined && (
        <p role="alert" className="error-text">
          {state.error}
        </p>
      )}
      <table aria-label="Traces" className="trace-table">
        <thead>
          <tr>
            <th>Name</th>
            <th>Status</th>
            <th>Started</th>
            <th className="num">Duration</th>
            <th className="num">Spans</th>
            <th className="num">Tokens</th>
            <th className="num">Cost</th>
          </tr>
        </thead>
        <tbody>
          {state.items.map((trace) => (
            <tr key={trace.id}>
              <td className="name-cell">
                <Link href={`/ui/traces/${trace.id}`}>{trace.name ?? <span className="mono">{trace.id}</span>}</Link>
                {trace.sessionId != null && <span className="muted"> · {trace.sessionId}</span>}
              </td>
              <td>
                <StatusBadge status={trace.status} />
              </td>
              <td className="mono">{formatTime(trace.startedAt)}</td>
              <td className="num">{formatDuration(trace.totalDurationMs)}</td>
              <td className="num">{formatCount(trace.spanCount)}</td>
              <td className="num">{formatCount(trace.totalTokens)}</td>
              <td className="num">{formatCost(trace.totalCost)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {!state.loading && state.items.length === 0 && state.error === undefined && (
        <p className="muted empty-note">
          {filterKey === ""
            ? "No traces yet. Record one with POST /api/v1/traces or OTLP."
            : "No trace matches these filters."}
        </p>
      )}
      <div ref={sentinel} className="list-end">
        {state.loading ? (
          "Loading…"
        ) : state.nextCursor !== undefined ? (
          <button type="button" className="quiet" onClick={loadMore}>
            Load more
          </button>
        ) : null}
      </div>
    </section>
  )
}
