import { useEffect, useState } from "react"
import type { ApiCallError } from "../../api/client.ts"
import { fetchTraceWire, type TraceDetailWire } from "../../api/traceWire.ts"
import type { PageProps } from "../../routes.tsx"
import { Link, navigate } from "../../shell/router.tsx"
import { useSession } from "../../shell/session.tsx"
import { useApi } from "../../shell/useApi.ts"
import { Comparison } from "./Comparison.tsx"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Picks the two traces: typed ids, or from the account's recent traces (a datalist on both fields). */
const ComparePicker = (props: { readonly left: string; readonly right: string }) => {
  const [left, setLeft] = useState(props.left)
  const [right, setRight] = useState(props.right)
  const recent = useApi((client) => client.traces.list({ urlParams: { limit: 50, offset: 0, total: "capped" } }), [])
  const valid = UUID.test(left.trim()) && UUID.test(right.trim())
  return (
    <form
      className="compare-picker"
      aria-label="Choose two traces"
      onSubmit={(e) => {
        e.preventDefault()
        if (valid)
          navigate(`/ui/compare?left=${encodeURIComponent(left.trim())}&right=${encodeURIComponent(right.trim())}`)
      }}
    >
      <label>
        Original trace{" "}
        <input className="mono" value={left} onChange={(e) => setLeft(e.target.value)} list="recent-traces" size={40} />
      </label>
      <label>
        Other trace{" "}
        <input
          className="mono"
          value={right}
          onChange={(e) => setRight(e.target.value)}
          list="recent-traces"
          size={40}
        />
      </label>
      <button type="submit" disabled={!valid}>
        Compare
      </button>
      <datalist id="recent-traces">
        {recent.data?.items.map((t) => (
          <option key={t.id} value={t.id}>
            {t.name ?? ""}
          </option>
        ))}
      </datalist>
    </form>
  )
}

/** Loads one trace as the API sends it (not decoded span by span: a 10,000-span trace decodes slowly in a browser). */
const useTraceWire = (traceId: string) => {
  const { key, signOut } = useSession()
  const [state, setState] = useState<{ readonly trace?: TraceDetailWire; readonly error?: ApiCallError }>({})
  useEffect(() => {
    const abort = new AbortController()
    setState({})
    fetchTraceWire(key, traceId, abort.signal).then(
      (trace) => abort.signal.aborted || setState({ trace }),
      (error: ApiCallError) => {
        if (abort.signal.aborted) return
        if (error.code === "unauthorized") return signOut("Your key is no longer accepted. Sign in again.")
        setState({ error })
      }
    )
    return () => abort.abort()
  }, [key, traceId, signOut])
  return state
}

/** Loads two traces of the account and compares them. */
export const TracePairComparison = (props: { readonly leftId: string; readonly rightId: string }) => {
  const left = useTraceWire(props.leftId)
  const right = useTraceWire(props.rightId)
  const error = left.error ?? right.error
  if (error !== undefined) {
    return (
      <p role="alert" className="error-text">
        {error.code === "not_found" ? "One of the traces does not exist in this account." : error.message}
      </p>
    )
  }
  if (left.trace === undefined || right.trace === undefined)
    return (
      <p aria-busy="true" className="muted">
        Loading both traces…
      </p>
    )
  return <Comparison left={left.trace} right={right.trace} />
}

/** /ui/compare?left=…&right=…: any two traces of the account side by side. */
export const ComparePage = (props: PageProps) => {
  const left = props.search.get("left") ?? ""
  const right = props.search.get("right") ?? ""
  const ready = UUID.test(left) && UUID.test(right)
  return (
    <section className="page">
      <h1>Compare traces</h1>
      <ComparePicker key={`${left}|${right}`} left={left} right={right} />
      {ready && <TracePairComparison leftId={left} rightId={right} />}
    </section>
  )
}

/** "Compare": a link for a trace's page or row that opens the comparison with this trace as the original. */
export const CompareLink = (props: { readonly traceId: string }) => (
  <Link href={`/ui/compare?left=${encodeURIComponent(props.traceId)}`} className="button-link">
    Compare
  </Link>
)

/** The trace page's header action: compare this trace with another run. */
export const CompareAction = (props: { readonly trace: { readonly id: string } }) => (
  <CompareLink traceId={props.trace.id} />
)
