import { Schema } from "effect"
import { required } from "./Described.ts"
import { PageNumber } from "./Page.ts"
import { TraceId } from "./Ids.ts"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

export const InsightKind = Schema.Literal("failed_span", "tool_loop", "cost_anomaly", "latency_anomaly", "token_blowup")
export type InsightKind = typeof InsightKind.Type

export const InsightSeverity = Schema.Literal("low", "medium", "high")
export type InsightSeverity = typeof InsightSeverity.Type

/** A finding of the terminal-trace detection, in responses (camelCase). */
export const Insight = Schema.Struct({
  id: required(Schema.UUID, "The finding's id"),
  traceId: required(TraceId, "The trace it is about"),
  kind: required(InsightKind, "What was detected"),
  severity: required(InsightSeverity, "low, medium or high"),
  message: required(Schema.String, "What was found, in one sentence"),
  details: required(Schema.Unknown, "The evidence: span ids, counts, costs, depending on the kind"),
  createdAt: required(Schema.String, "When it was found (ISO 8601)")
}).annotations({ identifier: "Insight" })
export type Insight = typeof Insight.Type

export const InsightList = Schema.Struct({
  items: required(Schema.Array(Insight), "This page's findings, newest first"),
  total: required(Schema.Int, "How many findings match, over all pages"),
  limit: required(Schema.Int, "The page size asked for"),
  offset: required(Schema.Int, "How many were skipped before this page")
}).annotations({ identifier: "InsightList" })

/** Query of GET /api/v1/insights (strict). */
export const ListInsightsParams = Schema.Struct({
  trace_id: Schema.optional(TraceId),
  kind: Schema.optional(InsightKind),
  limit: Schema.optionalWith(PageNumber(1, 100), { default: () => 50 }),
  offset: Schema.optionalWith(PageNumber(0, Number.MAX_SAFE_INTEGER), { default: () => 0 })
}).annotations(strict)
export type ListInsightsParams = typeof ListInsightsParams.Type

/** The facts detection needs about one span (read compactly: no payloads). */
export interface SpanFacts {
  readonly id: string
  readonly spanType: string
  readonly name: string
  /** an `error` span, a span with an error string, or metadata.status failed/error */
  readonly failed: boolean
  readonly error: string | null
  /** input + output tokens */
  readonly tokens: number
  /** hash of the tool arguments' canonical JSON (keys sorted: Detection.argsHash), for tool_call spans */
  readonly argsHash: string | null
}

export interface TraceFacts {
  readonly status: "completed" | "failed"
  readonly totalCost: number
  readonly latencyMs: number
}

/** Medians of the account's recent terminal traces (before this one); null when there is no such trace. */
export interface Baseline {
  readonly sample: number
  readonly medianCost: number | null
  readonly medianLatencyMs: number | null
}

export interface DetectionSettings {
  /** the same tool with the same arguments this many times or more is a loop */
  readonly loopRepeats: number
  /** cost or latency above factor × the baseline median is an anomaly */
  readonly baselineFactor: number
  /** fewer baseline traces than this: no cost or latency verdict */
  readonly baselineMinSample: number
  /** a span's tokens above factor × the trace's median span tokens is a blow-up (with ≥ 3 spans carrying tokens) */
  readonly tokenFactor: number
  /** a span's tokens above this is a blow-up whatever the median */
  readonly tokenCap: number
}

export interface Finding {
  readonly kind: InsightKind
  /** what makes the finding unique within its trace and kind (a span id, a tool and its arguments, or "") */
  readonly key: string
  readonly severity: InsightSeverity
  readonly message: string
  readonly details: Record<string, unknown>
}

/** Most findings of one kind stored per trace. */
export const MAX_FINDINGS_PER_KIND = 50

export const median = (values: ReadonlyArray<number>): number | null => {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const round = (n: number, digits = 2) => Number(n.toFixed(digits))

const failedSpans = (trace: TraceFacts, spans: ReadonlyArray<SpanFacts>): Array<Finding> =>
  spans
    .filter((s) => s.failed)
    .slice(0, MAX_FINDINGS_PER_KIND)
    .map((s) => ({
      kind: "failed_span",
      key: s.id,
      severity: trace.status === "failed" ? "high" : "medium",
      message: `span '${s.name.slice(0, 200)}' failed${s.error === null ? "" : `: ${s.error.slice(0, 300)}`}`,
      details: { spanId: s.id, spanName: s.name, spanType: s.spanType, error: s.error }
    }))

const toolLoops = (spans: ReadonlyArray<SpanFacts>, settings: DetectionSettings): Array<Finding> => {
  const groups = new Map<string, Array<SpanFacts>>()
  for (const s of spans) {
    if (s.spanType !== "tool_call" || s.argsHash === null) continue
    const key = `${s.name}\u0000${s.argsHash}`
    const group = groups.get(key)
    if (group === undefined) groups.set(key, [s])
    else group.push(s)
  }
  return [...groups.values()]
    .filter((g) => g.length >= settings.loopRepeats)
    .sort((a, b) => b.length - a.length)
    .slice(0, MAX_FINDINGS_PER_KIND)
    .map((g) => {
      const first = g[0]!
      return {
        kind: "tool_loop",
        key: `${first.name}:${first.argsHash}`,
        severity: g.length >= 2 * settings.loopRepeats ? "high" : "medium",
        message: `tool '${first.name.slice(0, 200)}' was called ${g.length} times with the same arguments`,
        details: {
          tool: first.name,
          argsHash: first.argsHash,
          count: g.length,
          spanIds: g.slice(0, 20).map((s) => s.id)
        }
      }
    })
}

const aboveBaseline = (
  kind: "cost_anomaly" | "latency_anomaly",
  value: number,
  baselineMedian: number | null,
  baseline: Baseline,
  settings: DetectionSettings
): Array<Finding> => {
  if (baseline.sample < settings.baselineMinSample || baselineMedian === null || !(baselineMedian > 0)) return []
  const ratio = value / baselineMedian
  if (!(ratio > settings.baselineFactor)) return []
  const what = kind === "cost_anomaly" ? `cost $${round(value, 6)}` : `latency ${Math.round(value)} ms`
  const usual = kind === "cost_anomaly" ? `$${round(baselineMedian, 6)}` : `${Math.round(baselineMedian)} ms`
  return [
    {
      kind,
      key: "",
      severity: ratio > 3 * settings.baselineFactor ? "high" : "medium",
      message: `${what} is ${round(ratio, 1)}× the median ${usual} of the account's last ${baseline.sample} terminal traces`,
      details: {
        value,
        baselineMedian,
        ratio: round(ratio, 3),
        sample: baseline.sample,
        factor: settings.baselineFactor
      }
    }
  ]
}

const tokenBlowups = (spans: ReadonlyArray<SpanFacts>, settings: DetectionSettings): Array<Finding> => {
  const withTokens = spans.filter((s) => s.tokens > 0)
  const med = withTokens.length >= 3 ? median(withTokens.map((s) => s.tokens)) : null
  return withTokens
    .filter((s) => s.tokens > settings.tokenCap || (med !== null && med > 0 && s.tokens > settings.tokenFactor * med))
    .sort((a, b) => b.tokens - a.tokens)
    .slice(0, MAX_FINDINGS_PER_KIND)
    .map((s) => ({
      kind: "token_blowup",
      key: s.id,
      severity: s.tokens > settings.tokenCap ? "high" : "medium",
      message:
        s.tokens > settings.tokenCap
          ? `span '${s.name.slice(0, 200)}' used ${s.tokens} tokens, above the cap of ${settings.tokenCap}`
          : `span '${s.name.slice(0, 200)}' used ${s.tokens} tokens, ${round(s.tokens / med!, 1)}× the trace's median of ${med}`,
      details: { spanId: s.id, spanName: s.name, tokens: s.tokens, traceMedianTokens: med, cap: settings.tokenCap }
    }))
}

/** Every finding about a terminal trace: failed spans, tool loops, cost and latency anomalies, token blow-ups. */
export const detect = (
  trace: TraceFacts,
  spans: ReadonlyArray<SpanFacts>,
  baseline: Baseline,
  settings: DetectionSettings
): Array<Finding> => [
  ...failedSpans(trace, spans),
  ...toolLoops(spans, settings),
  ...aboveBaseline("cost_anomaly", trace.totalCost, baseline.medianCost, baseline, settings),
  ...aboveBaseline("latency_anomaly", trace.latencyMs, baseline.medianLatencyMs, baseline, settings),
  ...tokenBlowups(spans, settings)
]
