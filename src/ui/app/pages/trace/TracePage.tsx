import type { TraceId } from "../../../../domain/Ids.ts"
import type { PageProps } from "../../routes.tsx"
import { useApi } from "../../shell/useApi.ts"

/** One trace: its spans. */
export const TracePage = (props: PageProps) => {
  const traceId = props.params.traceId! as TraceId
  const trace = useApi((client) => client.traces.get({ path: { traceId } }), [traceId])
  if (trace.status === "error") return <section className="page"><p role="alert" className="error-text">{trace.error.message}</p></section>
  if (trace.data === undefined) return <section className="page" aria-busy="true">Loading…</section>
  return (
    <section className="page">
      <h1>{trace.data.name ?? trace.data.id}</h1>
      <ul aria-label="Spans">
        {trace.data.spans.map((span) => <li key={span.id}>{span.name}</li>)}
      </ul>
    </section>
  )
}
