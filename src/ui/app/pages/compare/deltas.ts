import type { ComparableSpan } from "./alignSpans.ts"
import { canonicalJson } from "./alignSpans.ts"

/** The totals of a trace the comparison heads with; both the decoded and the wire form of a trace fit. */
export interface ComparableTrace {
  readonly totalTokens?: number | undefined
  readonly totalCost?: string | undefined
  readonly totalDurationMs?: number | undefined
  readonly output?: unknown
  readonly spans: ReadonlyArray<ComparableSpan>
}

export interface Delta {
  readonly left: number
  readonly right: number
  /** right − left */
  readonly change: number
  /** change / left; null when left is 0 (no meaningful ratio). */
  readonly ratio: number | null
}

export interface TraceDeltas {
  readonly tokens: Delta
  readonly cost: Delta
  /** The traces' recorded wall-clock durations. */
  readonly latencyMs: Delta
  /**
   * Time spent in model and tool calls (their `duration_ms` summed). A replay's result trace keeps the copied
   * spans' original timestamps, so its wall-clock duration spans both runs; this one compares the work itself.
   */
  readonly callTimeMs: Delta
  readonly outputChanged: boolean
}

const delta = (left: number, right: number): Delta => ({
  left,
  right,
  change: right - left,
  ratio: left === 0 ? null : (right - left) / left
})

const sum = (spans: ReadonlyArray<ComparableSpan>, pick: (s: ComparableSpan) => number | undefined) =>
  spans.reduce((acc, s) => acc + (pick(s) ?? 0), 0)

/** A trace's totals: the recorded ones, else summed from its spans (a trace still running may lack them). */
export const traceTotals = (trace: ComparableTrace) => {
  const spanTokens = sum(trace.spans, (s) => (s.input_tokens ?? 0) + (s.output_tokens ?? 0))
  const spanCost = sum(trace.spans, (s) => s.cost)
  const recordedCost = trace.totalCost === undefined ? NaN : Number(trace.totalCost)
  return {
    tokens: trace.totalTokens !== undefined && trace.totalTokens > 0 ? trace.totalTokens : spanTokens,
    cost: Number.isFinite(recordedCost) && recordedCost > 0 ? recordedCost : spanCost,
    latencyMs: trace.totalDurationMs ?? 0,
    callTimeMs: sum(trace.spans, (s) => (s.span_type === "llm_call" || s.span_type === "tool_call" ? s.duration_ms : 0))
  }
}

/** The deltas at the top of a comparison: tokens, cost, latency, and whether the final output changed. */
export const traceDeltas = (left: ComparableTrace, right: ComparableTrace): TraceDeltas => {
  const a = traceTotals(left)
  const b = traceTotals(right)
  return {
    tokens: delta(a.tokens, b.tokens),
    cost: delta(a.cost, b.cost),
    latencyMs: delta(a.latencyMs, b.latencyMs),
    callTimeMs: delta(a.callTimeMs, b.callTimeMs),
    outputChanged: canonicalJson(left.output) !== canonicalJson(right.output)
  }
}

/** A signed change for display: "+12", "−$0.0031", "±0"; percentages when a ratio exists. */
export const formatChange = (d: Delta, show: (magnitude: number) => string = (n) => n.toFixed(0)): string => {
  if (d.change === 0) return "±0"
  const sign = d.change > 0 ? "+" : "−"
  const magnitude = show(Math.abs(d.change))
  const pct = d.ratio === null ? "" : ` (${sign}${Math.abs(d.ratio * 100).toFixed(0)}%)`
  return `${sign}${magnitude}${pct}`
}
