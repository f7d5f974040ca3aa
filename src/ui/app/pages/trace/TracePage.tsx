import { Either, Schema } from "effect"
import { useCallback, useEffect, useMemo, useRef, useState } from "react"
import { Trace, TraceLookupPath } from "../../../../domain/Trace.ts"
import type { ApiCallError } from "../../api/client.ts"
import { fetchTraceWire, type SpanWire, type TraceDetailWire } from "../../api/traceWire.ts"
import type { LiveEvent } from "../../api/stream.ts"
import type { PageProps } from "../../routes.tsx"
import { Link, navigate } from "../../shell/router.tsx"
import { useSession } from "../../shell/session.tsx"
import { useLive } from "../../shell/useLive.ts"
import { spanActions } from "./actions.tsx"
import { SpanInspector } from "./SpanInspector.tsx"
import { SpanRows } from "./SpanRows.tsx"
import { buildSpanTree, revealing, visibleRows } from "./spanTree.ts"
import { TraceHeader } from "./TraceHeader.tsx"

const decodeLookup = Schema.decodeUnknownEither(TraceLookupPath)

type Loaded =
  | { readonly status: "loading" }
  | { readonly status: "missing"; readonly message: string }
  | {
      readonly status: "ok"
      readonly trace: TraceDetailWire
      readonly spans: ReadonlyArray<SpanWire>
      readonly ordered: boolean
    }

/** One trace: the span tree beside its waterfall, the inspector of the selected span (`?span=`), growing live. */
export const TracePage = (props: PageProps) => {
  const rawId = props.params.traceId!
  const { key, signOut } = useSession()
  const [loaded, setLoaded] = useState<Loaded>({ status: "loading" })
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(new Set())
  const inspector = useRef<HTMLElement>(null)
  const selected = props.search.get("span") ?? undefined

  useEffect(() => {
    const path = decodeLookup({ traceId: rawId })
    if (Either.isLeft(path))
      return setLoaded({
        status: "missing",
        message: "This is not a trace id (a UUID, or a 32-digit OpenTelemetry trace id)."
      })
    const abort = new AbortController()
    setLoaded({ status: "loading" })
    setCollapsed(new Set())
    fetchTraceWire(key, rawId, abort.signal).then(
      (trace) => {
        if (abort.signal.aborted) return
        setLoaded({ status: "ok", trace, spans: trace.spans, ordered: true })
        // Found by its OpenTelemetry id: the address becomes the trace's own.
        if (trace.id !== rawId) navigate(`/ui/traces/${trace.id}${window.location.search}`, { replace: true })
      },
      (error: ApiCallError) => {
        if (abort.signal.aborted) return
        if (error.code === "unauthorized") return signOut("Your key is no longer accepted. Sign in again.")
        setLoaded({
          status: "missing",
          message: error.code === "not_found" ? "No such trace in this account." : error.message
        })
      }
    )
    return () => abort.abort()
  }, [rawId, key, signOut])

  // Spans that arrive live replace their earlier version; the tree is then laid out here (the server's causal
  // order no longer covers every span).
  const onLive = useCallback((events: ReadonlyArray<LiveEvent>) => {
    setLoaded((current) => {
      if (current.status !== "ok") return current
      let trace = current.trace
      let spans: Map<string, SpanWire> | undefined
      for (const event of events) {
        if (event.traceId !== trace.id) continue
        if (event.type === "span") {
          spans ??= new Map(current.spans.map((s) => [s.id, s] as const))
          spans.set(event.span.id, event.span)
        } else if (event.trace !== undefined) {
          trace = { ...trace, ...Schema.encodeSync(Trace)(event.trace) }
        }
      }
      if (spans === undefined && trace === current.trace) return current
      return {
        status: "ok",
        trace,
        spans: spans === undefined ? current.spans : [...spans.values()],
        ordered: spans === undefined && current.ordered
      }
    })
  }, [])
  const traceIsRunning = loaded.status === "ok" && loaded.trace.status === "running"
  const live = useLive({ trace_id: loaded.status === "ok" ? loaded.trace.id : rawId }, onLive, traceIsRunning)

  const tree = useMemo(
    () => (loaded.status === "ok" ? buildSpanTree(loaded.spans, loaded.ordered ? loaded.trace : undefined) : undefined),
    [loaded]
  )
  const rows = useMemo(() => (tree === undefined ? [] : visibleRows(tree, collapsed)), [tree, collapsed])

  const select = useCallback((id: string) => {
    const search = new URLSearchParams(window.location.search)
    search.set("span", id)
    navigate(`${window.location.pathname}?${search.toString()}`, { replace: true })
  }, [])
  const toggle = useCallback((id: string, open?: boolean) => {
    setCollapsed((current) => {
      const next = new Set(current)
      const shouldOpen = open ?? next.has(id)
      if (shouldOpen) next.delete(id)
      else next.add(id)
      return next
    })
  }, [])

  // A deep link to a span inside a collapsed subtree opens the way to it.
  useEffect(() => {
    if (
      tree !== undefined &&
      selected !== undefined &&
      tree.byId.has(selected) &&
      !rows.some((r) => r.id === selected)
    ) {
      setCollapsed((current) => revealing(tree, current, selected))
    }
  }, [tree, selected, rows])

  if (loaded.status === "loading")
    return (
      <section className="page" aria-busy="true">
        <p className="muted">Loading trace…</p>
      </section>
    )
  if (loaded.status === "missing") {
    return (
      <section className="page empty">
        <h1>Trace not found</h1>
        <p className="muted">
          {loaded.message} <Link href="/ui/traces">Back to traces</Link>
        </p>
      </section>
    )
  }
  const node = selected === undefined ? undefined : tree!.byId.get(selected)
  return (
    <section className="trace-page">
      <TraceHeader trace={loaded.trace} tree={tree!} live={live} />
      <div className="trace-body">
        <SpanRows
          tree={tree!}
          rows={rows}
          collapsed={collapsed}
          selected={node?.id}
          onSelect={select}
          onToggle={toggle}
          onOpen={() => inspector.current?.focus()}
        />
        <SpanInspector
          ref={inspector}
          node={node}
          actions={
            node === undefined || spanActions.length === 0
              ? undefined
              : spanActions.map((Action, i) => <Action key={i} trace={loaded.trace} span={node.span} />)
          }
        />
      </div>
    </section>
  )
}
