import type { LiveState } from "../../api/stream.ts"
import type { TraceDetailWire } from "../../api/traceWire.ts"
import { StatusBadge } from "../../components/StatusBadge.tsx"
import { formatCost, formatCount, formatDuration, formatTime } from "../../format.ts"
import { Link } from "../../shell/router.tsx"
import { traceActions } from "./actions.tsx"
import type { SpanTree } from "./spanTree.ts"

/** The trace at a glance: name, status, when, how long, how many spans, tokens and cost, and its session. */
export const TraceHeader = (props: {
  readonly trace: TraceDetailWire
  readonly tree: SpanTree
  readonly live: LiveState
}) => {
  const { trace, tree } = props
  const duration = trace.totalDurationMs ?? (tree.nodes.length > 0 ? tree.endMs - tree.startMs : undefined)
  const errors = tree.roots.reduce((sum, root) => sum + root.rollup.errors, 0)
  return (
    <header className="trace-header">
      <div className="trace-title">
        <Link href="/ui/traces" className="muted">
          Traces
        </Link>
        <span className="muted">/</span>
        <h1>{trace.name ?? trace.id}</h1>
        <StatusBadge status={trace.status} />
        {trace.status === "running" && (
          <span role="status" className={`live live-${props.live}`}>
            {props.live === "live" ? "Live" : props.live === "closed" ? "Offline" : "Connecting…"}
          </span>
        )}
        <div className="trace-actions">
          {traceActions.map((Action, i) => (
            <Action key={i} trace={trace} />
          ))}
        </div>
      </div>
      <dl className="trace-stats">
        <div>
          <dt>Started</dt>
          <dd>{formatTime(trace.startedAt)}</dd>
        </div>
        <div>
          <dt>Duration</dt>
          <dd>{formatDuration(duration)}</dd>
        </div>
        <div>
          <dt>Spans</dt>
          <dd>{formatCount(tree.nodes.length)}</dd>
        </div>
        <div>
          <dt>Tokens</dt>
          <dd>{formatCount(trace.totalTokens ?? tree.roots.reduce((s, r) => s + r.rollup.tokens, 0))}</dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd>{formatCost(trace.totalCost ?? tree.roots.reduce((s, r) => s + r.rollup.cost, 0))}</dd>
        </div>
        <div>
          <dt>Errors</dt>
          <dd className={errors > 0 ? "error-text" : ""}>{errors}</dd>
        </div>
        <div>
          <dt>Concurrent groups</dt>
          <dd>{tree.groups.length}</dd>
        </div>
        {trace.environment === "sandbox" && (
          <div>
            <dt>Environment</dt>
            <dd>sandbox</dd>
          </div>
        )}
        {trace.sessionId != null && (
          <div>
            <dt>Session</dt>
            <dd>
              <Link href={`/ui/sessions/${encodeURIComponent(trace.sessionId)}`}>{trace.sessionId}</Link>
            </dd>
          </div>
        )}
        <div>
          <dt>Trace id</dt>
          <dd className="mono">{trace.id}</dd>
        </div>
      </dl>
    </header>
  )
}
