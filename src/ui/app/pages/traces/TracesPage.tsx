import type { PageProps } from "../../routes.tsx"
import { Link } from "../../shell/router.tsx"
import { useApi } from "../../shell/useApi.ts"
import { formatTime } from "../../format.ts"

/** The account's traces, newest first. */
export const TracesPage = (_props: PageProps) => {
  const list = useApi((client) => client.traces.list({ urlParams: { limit: 50, offset: 0 } }), [])
  return (
    <section className="page">
      <h1>Traces</h1>
      {list.status === "error" && <p role="alert" className="error-text">{list.error.message}</p>}
      <table aria-label="Traces">
        <thead>
          <tr><th>Name</th><th>Status</th><th>Started</th><th>Spans</th></tr>
        </thead>
        <tbody>
          {list.data?.items.map((trace) => (
            <tr key={trace.id}>
              <td><Link href={`/ui/traces/${trace.id}`}>{trace.name ?? trace.id}</Link></td>
              <td>{trace.status}</td>
              <td>{formatTime(trace.startedAt)}</td>
              <td>{trace.spanCount ?? 0}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  )
}
