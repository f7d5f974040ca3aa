import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { AccountId } from "#src/domain/Ids"
import type { TraceStatus } from "#src/domain/Trace"
import {
  type fromRow,
  readSpans,
  SPAN_WRITE_COLUMNS,
  SPAN_RECORD_COLUMNS,
  SPAN_RECORD_VALUES,
  spanSelect,
  SPAN_TOTALS,
  SPAN_UPSERT,
  type SpanRow,
  once,
  toWriteRecord
} from "../traces/SpanRecords.ts"
import type { MappedSpan } from "#src/domain/genai/MapSpan"
import { type PreparedTrace, spanCopyRows } from "./OtlpPrepare.ts"
import type { TraceFinalization } from "#src/domain/genai/TraceFinalize"
import { type CopyMessage, copyInTransaction } from "../storage/PgCopy.ts"
import { uuidArray } from "../storage/SqlArrays.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { KnownParts, writeWithKnownParts } from "../traces/KnownParts.ts"
import { partHasher } from "../traces/PayloadSplit.ts"
import { sentParts } from "../traces/PartPacking.ts"

// The finalize pass reads payloads of roots, local roots and model calls only.
const FINALIZE_SELECT = spanSelect(
  "parent_id IS NULL OR span_type = 'llm_call' OR metadata->'otel'->>'local_root' = 'true'"
)

/**
 * Below this many spans the upsert's single statement is kept: COPY takes an extra round trip, and its gain was
 * measured on 2000-span exports only.
 */
const COPY_MIN_SPANS = 100

const COPY_SPANS = `COPY spans (trace_id, account_id, ${SPAN_WRITE_COLUMNS}) FROM STDIN`

/** A trace's finalized fields as a `jsonb_to_recordset` record (TRACE_RECORD_COLUMNS); payloads wrapped as in spans. */
const traceRecord = (id: string, trace: TraceFinalization["trace"]) => ({
  id,
  name: trace.name,
  status: trace.status,
  input: trace.input === undefined ? null : [trace.input],
  output: trace.output === undefined ? null : [trace.output],
  session_id: trace.sessionId,
  started_at: trace.startedAt,
  ended_at: trace.endedAt,
  metadata: trace.metadata,
  environment: trace.environment,
  project_id: trace.projectId ?? null
})

const TRACE_RECORD_COLUMNS = `id uuid, name text, status text, input jsonb, output jsonb, session_id text,
  started_at timestamptz, ended_at timestamptz, metadata jsonb, environment text, project_id uuid`

/** total_duration_ms of a trace record `x` whose spans end at `lastEnd` (as TraceRepo derives it). */
const durationMs = (lastEnd: string) =>
  `GREATEST(0, floor(EXTRACT(EPOCH FROM (COALESCE(x.ended_at, ${lastEnd}, x.started_at) - x.started_at)) * 1000))::bigint`

export interface LockedTrace {
  readonly id: string
  readonly accountId: string
  readonly status: TraceStatus
  readonly deleted: boolean
}

/**
 * The spans as `json_to_recordset` records with their trace ids, each shared part's text sent once at most, and
 * compressed when that pays (PartPacking.sentPart).
 */
const recordsJson = (
  spans: ReadonlyArray<MappedSpan>,
  stored: ((hash: string) => boolean) | undefined,
  sent: Set<string>
) => {
  const omit = once(stored)
  const hash = partHasher()
  return JSON.stringify(
    spans.map((m) => {
      const record = toWriteRecord(m.span as never, omit, sent, hash) as ReturnType<typeof toWriteRecord> & {
        readonly input_parts?: ReadonlyArray<string | null>
        readonly output_parts?: ReadonlyArray<string | null>
      }
      return {
        ...record,
        input_parts: record.input_parts && sentParts(record.input_parts),
        output_parts: record.output_parts && sentParts(record.output_parts),
        trace_id: m.traceId
      }
    })
  )
}

/** The SQL of OTLP ingestion: many traces and spans a request, each step one statement. */
export class OtlpStore extends Effect.Service<OtlpStore>()("tapedeck/OtlpStore", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const known = new KnownParts((yield* AppConfig).contentSweepGraceSeconds * 1000)

    /** The locks of a request's traces: those it created (locked by their insert) and the others, locked in id order. */
    const lockRest = (
      accountId: AccountId,
      traces: ReadonlyArray<{ id: string }>,
      inserted: ReadonlyArray<{ id: string }>
    ) =>
      Effect.gen(function* () {
        const created = new Set(inserted.map((r) => r.id))
        const locked = new Map<string, LockedTrace>()
        for (const id of created) locked.set(id, { id, accountId, status: "running", deleted: false })
        const existing = traces.filter((t) => !created.has(t.id)).map((t) => t.id)
        if (existing.length > 0) {
          const rows = yield* sql<LockedTrace>`
            SELECT id, account_id AS "accountId", status, deleted_at IS NOT NULL AS deleted
            FROM traces WHERE id = ANY(${uuidArray(existing)}::uuid[])
            ORDER BY id
            FOR UPDATE`
          for (const row of rows) locked.set(row.id, row)
        }
        return { created, locked }
      })

    /**
     * Creates the traces that do not exist yet (running, named later by the finalize pass) and locks every trace
     * of the request for the transaction; the ids of the created ones and every trace's current row. A created
     * trace is locked by its insert; only the others are read back, locked in id order after the inserts (which
     * also run in id order), so two requests never wait on each other in a cycle.
     */
    const createAndLock = Effect.fn("OtlpStore.createAndLock")(
      function* (accountId: AccountId, traces: ReadonlyArray<{ id: string; startedAt: string; otelTraceId: string }>) {
        const inserted = yield* sql<{ id: string }>`
          INSERT INTO traces (id, account_id, status, started_at, metadata)
          SELECT x.id, ${accountId}::uuid, 'running', x.started_at, jsonb_build_object('otel', jsonb_build_object('trace_id', x.otel_trace_id))
          FROM jsonb_to_recordset(${JSON.stringify(traces.map((t) => ({ id: t.id, started_at: t.startedAt, otel_trace_id: t.otelTraceId })))}::jsonb)
            AS x(id uuid, started_at timestamptz, otel_trace_id text)
          ORDER BY x.id
          ON CONFLICT (id) DO NOTHING
          RETURNING id`
        return yield* lockRest(accountId, traces, inserted)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * As `createAndLock`, for a prepared export: the traces created get their final fields and totals in their
     * insert (what `applyTraces` would write once the spans are in), so when every trace is new nothing is written
     * twice and the spans are not read back. The totals are those of SPAN_TOTALS over the prepared spans: the count,
     * the tokens (capped), the sum of the costs as numeric (exact, from the text COPY stores) and the latest end.
     */
    const createFinalAndLock = Effect.fn("OtlpStore.createFinalAndLock")(
      function* (accountId: AccountId, traces: ReadonlyArray<PreparedTrace>) {
        const records = traces.map(({ id, trace, totals }) => ({
          ...traceRecord(id, trace),
          n: totals.count,
          tokens: totals.tokens,
          costs: totals.costs,
          last_end: totals.lastEnd,
          models: totals.models,
          has_error: totals.hasError
        }))
        const inserted = yield* sql<{ id: string }>`
          INSERT INTO traces (id, account_id, name, status, input, output, session_id, started_at, ended_at, metadata,
                              environment, project_id, span_count, total_tokens, total_cost, total_duration_ms, models,
                              has_error)
          SELECT x.id, ${accountId}::uuid, x.name, x.status, x.input->0, x.output->0, x.session_id, x.started_at,
                 x.ended_at, x.metadata, x.environment, x.project_id, x.n, x.tokens,
                 (SELECT COALESCE(sum(c::numeric), 0) FROM jsonb_array_elements_text(x.costs) AS c),
                 ${sql.literal(durationMs("x.last_end"))},
                 ARRAY(SELECT DISTINCT m FROM jsonb_array_elements_text(x.models) AS m ORDER BY m), x.has_error
          FROM jsonb_to_recordset(${JSON.stringify(records)}::jsonb)
            AS x(${sql.literal(TRACE_RECORD_COLUMNS)}, n int, tokens bigint, costs jsonb, last_end timestamptz, models jsonb,
                 has_error boolean)
          ORDER BY x.id
          ON CONFLICT (id) DO NOTHING
          RETURNING id`
        return yield* lockRest(accountId, traces, inserted)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Inserts or replaces the spans (idempotent on (trace, span id)). */
    const upsertSpans = Effect.fn("OtlpStore.upsertSpans")(
      function* (accountId: AccountId, spans: ReadonlyArray<MappedSpan>) {
        if (spans.length === 0) return
        yield* writeWithKnownParts(
          known,
          accountId,
          (stored, sent) => sql`
          INSERT INTO spans (trace_id, account_id, ${sql.literal(SPAN_WRITE_COLUMNS)})
          SELECT x.trace_id, ${accountId}::uuid, ${sql.literal(SPAN_RECORD_VALUES)}
          FROM json_to_recordset(${recordsJson(
            spans,
            stored,
            sent
          )}::json) AS x(trace_id uuid, ${sql.literal(SPAN_RECORD_COLUMNS)})
          ${sql.literal(SPAN_UPSERT)}`
        )
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * COPY of spans that cannot be stored yet (their traces were created by this transaction): whether it ran, which
     * needs a transaction on a node-postgres connection (not PGlite).
     */
    const copySpans = (accountId: AccountId, spans: ReadonlyArray<MappedSpan>) =>
      copyRows(() => spanCopyRows(accountId, spans))

    /** COPY of span rows already encoded (`spanCopyRows`, possibly on another thread): whether it ran, as `copySpans`. */
    const copyRows = (rows: () => CopyMessage) => Effect.map(copyInTransaction(COPY_SPANS, rows), Option.isSome)

    /**
     * Writes the spans of traces this transaction created. On PostgreSQL they go in by COPY, which costs PostgreSQL
     * less CPU per span than the upsert's json_to_recordset; elsewhere, or for a few spans, by the upsert.
     */
    const insertNewSpans = Effect.fn("OtlpStore.insertNewSpans")(
      function* (accountId: AccountId, spans: ReadonlyArray<MappedSpan>) {
        const copied = spans.length >= COPY_MIN_SPANS && (yield* copySpans(accountId, spans))
        if (!copied) yield* upsertSpans(accountId, spans)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Every stored span of the traces, grouped by trace, as the finalize pass needs them: payloads only for
     * the spans it reads them from (roots, local roots and model calls).
     */
    const spansOf = Effect.fn("OtlpStore.spansOf")(
      function* (traceIds: ReadonlyArray<string>) {
        if (traceIds.length === 0) return new Map<string, Array<ReturnType<typeof fromRow>>>()
        const rows = yield* sql<SpanRow & { trace_id: string }>`
          SELECT trace_id, ${sql.literal(FINALIZE_SELECT)} FROM spans
          WHERE trace_id = ANY(${uuidArray(traceIds)}::uuid[])`
        const byTrace = new Map<string, Array<ReturnType<typeof fromRow>>>()
        for (const { row, span } of yield* readSpans(sql, rows)) {
          const list = byTrace.get(row.trace_id)
          if (list) list.push(span)
          else byTrace.set(row.trace_id, [span])
        }
        return byTrace
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Writes the finalize pass's span changes (agent fields, promoted usage, estimated costs); absent fields are kept. */
    const applySpanUpdates = Effect.fn("OtlpStore.applySpanUpdates")(
      function* (updates: ReadonlyArray<TraceFinalization["spanUpdates"][number] & { traceId: string }>) {
        if (updates.length === 0) return
        yield* sql`
          UPDATE spans s SET
            agent_id = COALESCE(x.agent_id, s.agent_id),
            agent_role = COALESCE(x.agent_role, s.agent_role),
            parent_agent_id = COALESCE(x.parent_agent_id, s.parent_agent_id),
            input_tokens = COALESCE(x.input_tokens, s.input_tokens),
            output_tokens = COALESCE(x.output_tokens, s.output_tokens),
            cost = COALESCE(x.cost, s.cost),
            extra = CASE WHEN x.cost_estimated
              THEN (COALESCE(s.extra::jsonb, '{}'::jsonb) || '{"cost_estimated":true}'::jsonb)::json ELSE s.extra END
          FROM jsonb_to_recordset(${JSON.stringify(updates.map((u) => ({ ...u, trace_id: u.traceId })))}::jsonb)
            AS x(trace_id uuid, id uuid, agent_id text, agent_role text, parent_agent_id text,
                 input_tokens bigint, output_tokens bigint, cost numeric, cost_estimated boolean)
          WHERE s.trace_id = x.trace_id AND s.id = x.id`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Writes the derived trace fields and, in the same statement, the span count and totals recomputed from the spans. */
    const applyTraces = Effect.fn("OtlpStore.applyTraces")(
      function* (traces: ReadonlyArray<{ id: string; trace: TraceFinalization["trace"] }>) {
        if (traces.length === 0) return
        const records = traces.map(({ id, trace }) => traceRecord(id, trace))
        yield* sql`
          UPDATE traces t SET
            name = x.name, status = x.status, input = x.input->0, output = x.output->0, session_id = x.session_id,
            started_at = x.started_at, ended_at = x.ended_at, metadata = x.metadata, environment = x.environment,
            project_id = COALESCE(x.project_id, t.project_id),
            updated_at = now(),
            span_count = COALESCE(agg.n, t.span_count), total_tokens = COALESCE(agg.tokens, t.total_tokens),
            models = COALESCE(agg.models, t.models), has_error = COALESCE(agg.has_error, t.has_error),
            total_cost = COALESCE(agg.cost, t.total_cost),
            total_duration_ms = CASE WHEN agg.trace_id IS NULL THEN t.total_duration_ms
              ELSE ${sql.literal(durationMs("agg.last_end"))} END
          FROM jsonb_to_recordset(${JSON.stringify(records)}::jsonb)
            AS x(${sql.literal(TRACE_RECORD_COLUMNS)})
          LEFT JOIN (
            SELECT trace_id, ${sql.literal(SPAN_TOTALS)} FROM spans WHERE trace_id = ANY(${uuidArray(traces.map((t) => t.id))}::uuid[])
            GROUP BY trace_id
          ) agg ON agg.trace_id = x.id
          WHERE t.id = x.id`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return {
      createAndLock,
      createFinalAndLock,
      upsertSpans,
      copySpans,
      copyRows,
      insertNewSpans,
      spansOf,
      applySpanUpdates,
      applyTraces
    } as const
  })
}) {}
