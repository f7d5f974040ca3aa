import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId, TraceId } from "#src/domain/Ids"
import { type Baseline, detect, type DetectionSettings, type SpanFacts } from "#src/domain/Insight"
import { AppConfig } from "../config/AppConfig.ts"
import { uuidArray } from "../storage/SqlArrays.ts"
import { hash64Hex } from "../platform/Hashes.ts"
import { type LayoutRow, withPayloads } from "../traces/SharedParts.ts"

interface TraceFactsRow {
  readonly id: TraceId
  readonly account_id: AccountId
  readonly status: "running" | "completed" | "failed"
  readonly environment: string
  readonly started_at: Date
  readonly total_cost: number
  readonly latency_ms: number
}

interface SpanFactsRow {
  readonly trace_id: string
  readonly account_id: string
  readonly id: string
  readonly span_type: string
  readonly name: string
  readonly failed: boolean
  readonly error: string | null
  readonly tokens: number
}

/**
 * JSON text of a value with every object's keys sorted: the same text for values jsonb holds equal, whatever their
 * key order, duplicate keys (the last wins, as in jsonb), spacing or number spelling (`1.0` and `1`).
 */
export const canonicalJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (typeof value === "object" && value !== null) {
    const keys = Object.keys(value).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`
  }
  return JSON.stringify(value)
}

/** A tool call's arguments hash: of its input's canonical JSON (an absent input as `null`), 16 hex digits. */
export const argsHash = (inputText: string | null) =>
  hash64Hex(inputText === null ? "null" : canonicalJson(JSON.parse(inputText)))

interface BaselineRow {
  readonly trace_id: string
  readonly sample: number
  readonly median_cost: number | null
  readonly median_latency_ms: number | null
}

// A trace's latency (`t`: the traces row's alias): its total duration, or its wall time when no duration was recorded.
const latency = (t: string) => `CASE WHEN ${t}.total_duration_ms > 0 THEN ${t}.total_duration_ms::float8
  ELSE GREATEST(0, COALESCE(EXTRACT(EPOCH FROM (${t}.ended_at - ${t}.started_at)) * 1000, 0))::float8 END`

/** A tool call's input in its stored layout (as LAYOUT_SELECT reads it), nothing for other spans; no output. */
const TOOL_INPUT = `CASE WHEN s.span_type = 'tool_call' THEN s.input::text END AS input,
  CASE WHEN s.span_type = 'tool_call' THEN s.input_skel END AS input_skel,
  CASE WHEN s.span_type = 'tool_call' THEN s.input_refs END AS input_refs,
  NULL::text AS output, NULL::text AS output_skel, NULL::text AS output_refs`

/**
 * Detection on terminal traces: failed spans, tool-call loops, cost and latency far above the account's
 * recent baseline, and token blow-ups, stored as insights. Idempotent: an insight is unique per
 * (trace, kind, key), so running it again for the same trace adds nothing it already found.
 */
export class Detection extends Effect.Service<Detection>()("tapedeck/Detection", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const settings: DetectionSettings = {
      loopRepeats: Math.max(2, config.insightLoopRepeats),
      baselineFactor: config.insightBaselineFactor,
      baselineMinSample: Math.max(1, config.insightBaselineMinSample),
      tokenFactor: config.insightTokenFactor,
      tokenCap: config.insightTokenCap
    }

    /**
     * Detects and stores the insights of terminal traces (each of the given account; others, running ones and
     * deleted ones are skipped): a few statements for the whole batch. How many new insights were stored.
     */
    const runMany = Effect.fn("Detection.runMany")(
      function* (traces: ReadonlyArray<{ readonly accountId: AccountId; readonly traceId: TraceId }>) {
        if (traces.length === 0) return 0
        yield* Effect.annotateCurrentSpan({ traces: traces.length })
        const ids = uuidArray(traces.map((t) => t.traceId))
        const owners = uuidArray(traces.map((t) => t.accountId))
        const found = yield* sql<TraceFactsRow>`
          SELECT t.id, t.account_id, t.status, t.environment, t.started_at, t.total_cost::float8 AS total_cost,
                 ${sql.unsafe(latency("t"))} AS latency_ms
          FROM unnest(${ids}::uuid[], ${owners}::uuid[]) AS k(id, account_id)
          JOIN traces t ON t.id = k.id AND t.account_id = k.account_id
          WHERE t.deleted_at IS NULL AND t.status <> 'running'`
        if (found.length === 0) return 0
        const foundIds = uuidArray(found.map((t) => t.id))
        // `= ANY` on the key's first column keeps this an index scan (a join with the traces was planned as a scan of
        // all spans). Tool calls' inputs are read in their stored layout and put together here (their shared parts
        // read once each) for their arguments' hash.
        const spanRows = yield* sql<SpanFactsRow & LayoutRow>`
          SELECT s.trace_id, s.account_id, s.id, s.span_type, s.name,
                 (s.span_type = 'error' OR s.error IS NOT NULL
                   OR lower(s.metadata->>'status') IN ('failed', 'error')) AS failed,
                 left(s.error, 1000) AS error,
                 (COALESCE(s.input_tokens, 0) + COALESCE(s.output_tokens, 0))::float8 AS tokens,
                 ${sql.literal(TOOL_INPUT)}
          FROM spans s
          WHERE s.trace_id = ANY(${foundIds}::uuid[])
          ORDER BY s.trace_id, s.started_at, s.id`
        const spans = (yield* withPayloads(sql, spanRows)).map((s) => ({
          ...s,
          args_hash: s.span_type === "tool_call" ? argsHash(s.input) : null
        }))
        const ownerOf = new Map(found.map((t) => [t.id as string, t.account_id as string]))
        const spansOf = Map.groupBy(
          spans.filter((s) => ownerOf.get(s.trace_id) === s.account_id),
          (s) => s.trace_id
        )
        // Per trace: the account's last N terminal traces started before it, in the same environment.
        const baselines = yield* sql<BaselineRow>`
          SELECT t.id AS trace_id, b.sample, b.median_cost, b.median_latency_ms
          FROM traces t CROSS JOIN LATERAL (
            SELECT count(*)::int AS sample,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) AS median_cost,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY latency) AS median_latency_ms
            FROM (
              SELECT r.total_cost::float8 AS cost, ${sql.unsafe(latency("r"))} AS latency
              FROM traces r
              WHERE r.account_id = t.account_id AND r.environment = t.environment AND r.deleted_at IS NULL
                AND r.status IN ('completed', 'failed') AND r.id <> t.id
                AND (r.started_at, r.id) < (t.started_at, t.id)
              ORDER BY r.started_at DESC, r.id DESC
              LIMIT ${config.insightBaselineWindow}
            ) recent
          ) b
          WHERE t.id = ANY(${foundIds}::uuid[])`
        const baselineOf = new Map(baselines.map((b) => [b.trace_id, b]))
        const rows = found.flatMap((trace) => {
          const b = baselineOf.get(trace.id)
          const baseline: Baseline = {
            sample: b?.sample ?? 0,
            medianCost: b?.median_cost ?? null,
            medianLatencyMs: b?.median_latency_ms ?? null
          }
          const facts = (spansOf.get(trace.id) ?? []).map(
            (s): SpanFacts => ({
              id: s.id,
              spanType: s.span_type,
              name: s.name,
              failed: s.failed,
              error: s.error,
              tokens: Number(s.tokens),
              argsHash: s.args_hash
            })
          )
          const terminal = {
            status: trace.status as Exclude<TraceFactsRow["status"], "running">, // the statement left running ones out
            totalCost: Number(trace.total_cost),
            latencyMs: Number(trace.latency_ms)
          }
          return detect(terminal, facts, baseline, settings).map((f) => ({
            id: crypto.randomUUID(),
            account_id: trace.account_id,
            trace_id: trace.id,
            kind: f.kind,
            key: f.key,
            severity: f.severity,
            message: f.message,
            details: f.details
          }))
        })
        if (rows.length === 0) return 0
        const inserted = yield* sql<{ id: string }>`
          INSERT INTO insights (id, account_id, trace_id, kind, key, severity, message, details)
          SELECT x.id, x.account_id, x.trace_id, x.kind, x.key, x.severity, x.message, x.details
          FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
            AS x(id uuid, account_id uuid, trace_id uuid, kind text, key text, severity text, message text, details jsonb)
          -- A loop found before under another arguments' hash (jsonb's own, computed in SQL until migration 0043) is
          -- the same loop: the same tool, from the same first span.
          WHERE x.kind <> 'tool_loop' OR NOT EXISTS (
            SELECT 1 FROM insights i
            WHERE i.trace_id = x.trace_id AND i.kind = 'tool_loop' AND i.details->>'tool' = x.details->>'tool'
              AND i.details->'spanIds'->0 = x.details->'spanIds'->0)
          ON CONFLICT (trace_id, kind, key) DO NOTHING
          RETURNING id`
        return inserted.length
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Detects and stores the insights of one terminal trace; how many new ones were stored. */
    const run = (accountId: AccountId, traceId: TraceId) => runMany([{ accountId, traceId }])

    return { run, runMany, settings } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
