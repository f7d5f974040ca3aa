import { formatTime } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { Link } from "../../shell/router.tsx"
import { useApi } from "../../shell/useApi.ts"

/** /ui/forks: the account's forks, newest first, each opening its comparison. */
export const ForksPage = (_props: PageProps) => {
  const list = useApi((client) => client.forks.list({ urlParams: { limit: 100, offset: 0 } }), [])
  return (
    <section className="page">
      <h1>Forks</h1>
      <p className="muted">
        Fork a run from a span of a trace ("Fork here"), or <Link href="/ui/compare">compare any two traces</Link>.
      </p>
      {list.status === "error" && (
        <p role="alert" className="error-text">
          {list.error.message}
        </p>
      )}
      <table aria-label="Forks" className="dense">
        <thead>
          <tr>
            <th>Name</th>
            <th>Status</th>
            <th>Source</th>
            <th>Result</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((f) => (
            <tr key={f.id}>
              <td>
                <Link href={`/ui/forks/${f.id}`}>{f.name ?? f.id}</Link>
              </td>
              <td>{f.status}</td>
              <td className="mono">
                <Link href={`/ui/traces/${f.traceId}`}>{f.traceId.slice(0, 8)}</Link>
              </td>
              <td className="mono">
                {f.resultTraceId ? (
                  <Link href={`/ui/traces/${f.resultTraceId}`}>{f.resultTraceId.slice(0, 8)}</Link>
                ) : (
                  "—"
                )}
              </td>
              <td>{f.createdAt ? formatTime(new Date(f.createdAt)) : "—"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.items.length === 0 && <p className="muted">No forks yet.</p>}
    </section>
  )
}
