import { formatCost, formatCount, formatDuration } from "../../format.ts"
import { type Delta, formatChange, type TraceDeltas } from "./deltas.ts"

const tone = (d: Delta) => (d.change === 0 ? "same" : d.change < 0 ? "better" : "worse")

const Cell = (props: { readonly label: string; readonly delta: Delta; readonly show: (n: number) => string }) => (
  <div className="delta" role="group" aria-label={props.label}>
    <div className="delta-label">{props.label}</div>
    <div className="delta-values mono">
      {props.show(props.delta.left)} → {props.show(props.delta.right)}
    </div>
    <div className={`delta-change mono ${tone(props.delta)}`}>{formatChange(props.delta, props.show)}</div>
  </div>
)

/** The comparison's headline: tokens, cost, latency and whether the final output changed. */
export const DeltaBar = (props: { readonly deltas: TraceDeltas }) => (
  <div className="delta-bar">
    <Cell label="Tokens" delta={props.deltas.tokens} show={formatCount} />
    <Cell label="Cost" delta={props.deltas.cost} show={formatCost} />
    <Cell label="Latency" delta={props.deltas.latencyMs} show={formatDuration} />
    <Cell label="Model and tool time" delta={props.deltas.callTimeMs} show={formatDuration} />
    <div className="delta" role="group" aria-label="Final output">
      <div className="delta-label">Final output</div>
      <div className={`delta-change ${props.deltas.outputChanged ? "worse" : "same"}`}>
        {props.deltas.outputChanged ? "changed" : "unchanged"}
      </div>
    </div>
  </div>
)
