import { formatCost, formatCount, formatTime } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { Link } from "../../shell/router.tsx"
import { useApi } from "../../shell/useApi.ts"
import "./sessions.css"

/** /ui/sessions: the account's sessions, most recently active first. */
export const SessionsPage = (_props: PageProps) => {
  const list = useApi((client) => client.sessions.list({ urlParams: { limit: 100, offset: 0 } }), [])
  return (
    <section className="page">
      <h1>Sessions</h1>
      {list.status === "error" && (
        <p role="alert" className="error-text">
          {list.error.message}
        </p>
      )}
      <table className="dense" aria-label="Sessions">
        <thead>
          <tr>
            <th>Session</th>
            <th>Traces</th>
            <th>Failed</th>
            <th>Spans</th>
            <th>Tokens</th>
            <th>Cost</th>
            <th>Last seen</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((s) => (
            <tr key={s.id}>
              <td className="mono">
                <Link href={`/ui/sessions/${encodeURIComponent(s.id)}`}>{s.id}</Link>
              </td>
              <td>{formatCount(s.traceCount)}</td>
              <td className={s.failedTraceCount > 0 ? "error-text" : ""}>{formatCount(s.failedTraceCount)}</td>
              <td>{formatCount(s.spanCount)}</td>
              <td>{formatCount(s.totalTokens)}</td>
              <td>{formatCost(s.totalCost)}</td>
              <td>{formatTime(new Date(s.lastSeen))}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.items.length === 0 && (
        <p className="muted">
          No sessions yet: traces carry a session with <code>session_id</code>.
        </p>
      )}
    </section>
  )
}
