import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId, TraceId } from "#src/domain/Ids"
import { type Baseline, detect, type DetectionSettings, type SpanFacts } from "#src/domain/Insight"
import { AppConfig } from "../config/AppConfig.ts"

interface TraceFactsRow {
  readonly status: "running" | "completed" | "failed"
  readonly environment: string
  readonly started_at: Date
  readonly total_cost: number
  readonly latency_ms: number
}

interface SpanFactsRow {
  readonly id: string
  readonly span_type: string
  readonly name: string
  readonly failed: boolean
  readonly error: string | null
  readonly tokens: number
  readonly args_hash: string | null
}

interface BaselineRow {
  readonly sample: number
  readonly median_cost: number | null
  readonly median_latency_ms: number | null
}

// A trace's latency: its total duration, or its wall time when no duration was recorded.
const LATENCY = `CASE WHEN total_duration_ms > 0 THEN total_duration_ms::float8
  ELSE GREATEST(0, COALESCE(EXTRACT(EPOCH FROM (ended_at - started_at)) * 1000, 0))::float8 END`

/**
 * Detection on terminal traces: failed spans, tool-call loops, cost and latency far above the account's
 * recent baseline, and token blow-ups, stored as insights. Idempotent: an insight is unique per
 * (trace, kind, key), so running it again for the same trace adds nothing it already found.
 */
export class Detection extends Effect.Service<Detection>()("tapedeck/Detection", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const settings: DetectionSettings = {
      loopRepeats: Math.max(2, config.insightLoopRepeats),
      baselineFactor: config.insightBaselineFactor,
      baselineMinSample: Math.max(1, config.insightBaselineMinSample),
      tokenFactor: config.insightTokenFactor,
      tokenCap: config.insightTokenCap
    }

    /** Detects and stores the insights of one terminal trace; how many new ones were stored. */
    const run = Effect.fn("Detection.run")(
      function*(accountId: AccountId, traceId: TraceId) {
        yield* Effect.annotateCurrentSpan({ traceId })
        const traces = yield* sql<TraceFactsRow>`
          SELECT status, environment, started_at, total_cost::float8 AS total_cost, ${sql.unsafe(LATENCY)} AS latency_ms
          FROM traces WHERE id = ${traceId} AND account_id = ${accountId} AND deleted_at IS NULL`
        const trace = traces[0]
        if (trace === undefined || trace.status === "running") return 0
        // jsonb text is canonical (keys sorted, whitespace normalised), so equal arguments hash equally.
        const spans = yield* sql<SpanFactsRow>`
          SELECT id, span_type, name,
                 (span_type = 'error' OR error IS NOT NULL
                   OR lower(metadata->>'status') IN ('failed', 'error')) AS failed,
                 left(error, 1000) AS error,
                 (COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0))::float8 AS tokens,
                 CASE WHEN span_type = 'tool_call' THEN md5(COALESCE(input::text, 'null')) END AS args_hash
          FROM spans WHERE trace_id = ${traceId} AND account_id = ${accountId}
          ORDER BY started_at, id`
        // The account's last N terminal traces started before this one, in the same environment.
        const baselines = yield* sql<BaselineRow>`
          SELECT count(*)::int AS sample,
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) AS median_cost,
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY latency) AS median_latency_ms
          FROM (
            SELECT total_cost::float8 AS cost, ${sql.unsafe(LATENCY)} AS latency
            FROM traces
            WHERE account_id = ${accountId} AND environment = ${trace.environment} AND deleted_at IS NULL
              AND status IN ('completed', 'failed') AND id <> ${traceId}
              AND (started_at, id) < (${trace.started_at.toISOString()}::timestamptz, ${traceId}::uuid)
            ORDER BY started_at DESC, id DESC
            LIMIT ${config.insightBaselineWindow}
          ) recent`
        const b = baselines[0]
        const baseline: Baseline = {
          sample: b?.sample ?? 0,
          medianCost: b?.median_cost ?? null,
          medianLatencyMs: b?.median_latency_ms ?? null
        }
        const facts: Array<SpanFacts> = spans.map((s) => ({
          id: s.id,
          spanType: s.span_type,
          name: s.name,
          failed: s.failed,
          error: s.error,
          tokens: Number(s.tokens),
          argsHash: s.args_hash
        }))
        const findings = detect(
          { status: trace.status, totalCost: Number(trace.total_cost), latencyMs: Number(trace.latency_ms) },
          facts,
          baseline,
          settings
        )
        if (findings.length === 0) return 0
        const rows = findings.map((f) => ({
          id: crypto.randomUUID(),
          kind: f.kind,
          key: f.key,
          severity: f.severity,
          message: f.message,
          details: f.details
        }))
        const inserted = yield* sql<{ id: string }>`
          INSERT INTO insights (id, account_id, trace_id, kind, key, severity, message, details)
          SELECT x.id, ${accountId}::uuid, ${traceId}::uuid, x.kind, x.key, x.severity, x.message, x.details
          FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
            AS x(id uuid, kind text, key text, severity text, message text, details jsonb)
          ON CONFLICT (trace_id, kind, key) DO NOTHING
          RETURNING id`
        return inserted.length
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { run, settings } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
