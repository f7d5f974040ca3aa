import { useCallback, useState } from "react"
import { fetchTraceWire } from "../../api/traceWire.ts"
import type { Trace as TraceSchema } from "../../../../domain/Trace.ts"
import { formatCost, formatCount, formatDuration, formatTime } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { Link } from "../../shell/router.tsx"
import { useSession } from "../../shell/session.tsx"
import { useApi } from "../../shell/useApi.ts"
import { AgentGraph } from "./AgentGraph.tsx"
import "./sessions.css"

type Trace = TraceSchema

/** Where an agent ran: the session's traces that have its spans, with the first such span to open. */
interface AgentTraces {
  readonly agentId: string | null
  readonly status: "loading" | "ok" | "error"
  readonly traces: ReadonlyArray<{ readonly trace: Trace; readonly spanId: string; readonly spans: number }>
}

/** Most traces of a session read to find where a clicked agent ran (each is a full trace read). */
const AGENT_LOOKUP_TRACES = 50

/** /ui/sessions/{id}: the session's totals, its traces in order, and its agent graph (agents → the traces they ran in). */
export const SessionPage = (props: PageProps) => {
  const sessionId = props.params.sessionId!
  // Pages of 100 traces: the earlier pages are kept here while the next one loads.
  const [offset, setOffset] = useState(0)
  const [earlier, setEarlier] = useState<ReadonlyArray<Trace>>([])
  const session = useApi(
    (client) => client.sessions.get({ path: { sessionId }, urlParams: { limit: 100, offset } }),
    [sessionId, offset]
  )
  const graph = useApi((client) => client.sessions.graph({ path: { sessionId }, urlParams: {} }), [sessionId])
  const { key } = useSession()
  const [agent, setAgent] = useState<AgentTraces | undefined>(undefined)

  // While the next page loads, the previous answer is still there: show only the pages already kept.
  const traces =
    session.data === undefined ? undefined : [...earlier, ...(session.status === "ok" ? session.data.traces : [])]
  const selectAgent = useCallback(
    async (agentId: string | null) => {
      if (traces === undefined) return
      setAgent({ agentId, status: "loading", traces: [] })
      try {
        const found: Array<AgentTraces["traces"][number]> = []
        for (const trace of traces.slice(0, AGENT_LOOKUP_TRACES)) {
          // As sent (not decoded span by span): only the agent ids are read.
          const detail = await fetchTraceWire(key, trace.id, undefined)
          const spans = detail.spans.filter((s) => (s.agent_id ?? null) === agentId)
          if (spans.length > 0) found.push({ trace, spanId: spans[0]!.id, spans: spans.length })
        }
        setAgent({ agentId, status: "ok", traces: found })
      } catch {
        setAgent({ agentId, status: "error", traces: [] })
      }
    },
    [traces, key]
  )

  if (session.status === "error" && session.data === undefined) {
    return (
      <section className="page">
        <p role="alert" className="error-text">
          {session.error.code === "not_found"
            ? "No trace of this account carries this session id."
            : session.error.message}
        </p>
      </section>
    )
  }
  if (session.data === undefined)
    return (
      <section className="page" aria-busy="true">
        Loading…
      </section>
    )
  const s = session.data
  return (
    <section className="page session-page">
      <h1>
        Session <span className="mono">{s.id}</span>
      </h1>
      <dl className="summary-strip">
        <div>
          <dt>Traces</dt>
          <dd>{formatCount(s.traceCount)}</dd>
        </div>
        <div>
          <dt>Failed</dt>
          <dd className={s.failedTraceCount > 0 ? "error-text" : ""}>{formatCount(s.failedTraceCount)}</dd>
        </div>
        <div>
          <dt>Spans</dt>
          <dd>{formatCount(s.spanCount)}</dd>
        </div>
        <div>
          <dt>Tokens</dt>
          <dd>{formatCount(s.totalTokens)}</dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd>{formatCost(s.totalCost)}</dd>
        </div>
        <div>
          <dt>First seen</dt>
          <dd>{formatTime(new Date(s.firstSeen))}</dd>
        </div>
        <div>
          <dt>Last seen</dt>
          <dd>{formatTime(new Date(s.lastSeen))}</dd>
        </div>
      </dl>
      <div className="session-split">
        <section aria-label="Session traces">
          <h2>Traces, in order</h2>
          <table className="dense" aria-label="Traces of the session">
            <thead>
              <tr>
                <th>#</th>
                <th>Name</th>
                <th>Status</th>
                <th>Started</th>
                <th>Duration</th>
                <th>Spans</th>
                <th>Tokens</th>
                <th>Cost</th>
              </tr>
            </thead>
            <tbody>
              {traces!.map((t, i) => (
                <tr key={t.id}>
                  <td className="muted">{i + 1}</td>
                  <td>
                    <Link href={`/ui/traces/${t.id}`}>{t.name ?? t.id}</Link>
                  </td>
                  <td className={t.status === "failed" ? "error-text" : ""}>{t.status}</td>
                  <td>{formatTime(t.startedAt)}</td>
                  <td>{formatDuration(t.totalDurationMs)}</td>
                  <td>{formatCount(t.spanCount)}</td>
                  <td>{formatCount(t.totalTokens)}</td>
                  <td>{formatCost(t.totalCost)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {s.hasMore && session.status === "ok" && (
            <button
              type="button"
              onClick={() => {
                setEarlier(traces!)
                setOffset(offset + 100)
              }}
            >
              Load more traces
            </button>
          )}
        </section>
        <section aria-label="Agents">
          <h2>Agents</h2>
          {graph.status === "error" && (
            <p role="alert" className="error-text">
              {graph.error.message}
            </p>
          )}
          {graph.data && (
            <div className="graph-scroll">
              <AgentGraph graph={graph.data} selected={agent?.agentId} onSelect={(id) => void selectAgent(id)} />
            </div>
          )}
          {agent && (
            <div className="agent-traces" aria-live="polite">
              <h2>Where {agent.agentId ?? "(root)"} ran</h2>
              {agent.status === "loading" && <p className="muted">Reading the session's traces…</p>}
              {agent.status === "error" && (
                <p role="alert" className="error-text">
                  Could not read the session's traces.
                </p>
              )}
              {agent.status === "ok" && agent.traces.length === 0 && (
                <p className="muted">In none of the first {AGENT_LOOKUP_TRACES} traces.</p>
              )}
              <ul aria-label={`Traces where ${agent.agentId ?? "(root)"} ran`}>
                {agent.traces.map((t) => (
                  <li key={t.trace.id}>
                    <Link href={`/ui/traces/${t.trace.id}?span=${t.spanId}`}>{t.trace.name ?? t.trace.id}</Link>{" "}
                    <span className="muted">{t.spans} spans</span>
                  </li>
                ))}
              </ul>
            </div>
          )}
        </section>
      </div>
    </section>
  )
}
