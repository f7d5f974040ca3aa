import { SqlClient, type Statement } from "@effect/sql"
import { DateTime, Effect, Option } from "effect"
import type { AccountId, TraceId } from "#src/domain/Ids"
import type { CreateTraceRequest, FinishTraceRequest, TraceStatus, TraceWire } from "#src/domain/Trace"
import type { Span } from "#src/domain/Span"
import { revokedOrDie } from "../storage/ApiKeyRepo.ts"
import { prepared } from "../storage/PreparedStatements.ts"
import {
  readSpans,
  SPAN_WRITE_COLUMNS,
  SPAN_PARTS_SELECT,
  spanJsonRow,
  type SpanPartsRow,
  SPAN_RECORD_COLUMNS,
  SPAN_RECORD_VALUES,
  SPAN_SELECT,
  SPAN_TOTALS,
  SPAN_UPSERT,
  type SpanRow,
  toWriteRecords,
  unwrap
} from "./SpanRecords.ts"
import { TraceIdTaken, TraceNotFound } from "#src/domain/Errors"
import { withPayloads, withResolvedParts } from "./SharedParts.ts"
import { KnownParts, writeWithKnownParts } from "./KnownParts.ts"
import { AppConfig } from "../config/AppConfig.ts"

export const TRACE_SELECT = `id, project_id, name, status,
  CASE WHEN input IS NULL THEN NULL ELSE jsonb_build_array(input) END AS input,
  CASE WHEN output IS NULL THEN NULL ELSE jsonb_build_array(output) END AS output,
  total_tokens::float8 AS total_tokens, total_cost::text AS total_cost,
  total_duration_ms::float8 AS total_duration_ms, span_count, session_id, started_at, ended_at, metadata,
  lossy, terminated_early, environment`

export interface TraceRow {
  readonly id: string
  readonly project_id: string | null
  readonly name: string | null
  readonly status: TraceStatus
  readonly input: unknown
  readonly output: unknown
  readonly total_tokens: number
  readonly total_cost: string
  readonly total_duration_ms: number
  readonly span_count: number
  readonly session_id: string | null
  readonly started_at: Date
  readonly ended_at: Date | null
  readonly metadata: Record<string, unknown> | null
  readonly lossy: boolean | null
  readonly terminated_early: boolean | null
  readonly environment: "production" | "sandbox"
}

const OTEL_TRACE_ID = /^[0-9a-f]{32}$/i

export const toTrace = (row: TraceRow): TraceWire => {
  const trace: Record<string, unknown> = {
    id: row.id,
    projectId: row.project_id,
    name: row.name,
    status: row.status,
    totalTokens: row.total_tokens,
    totalCost: row.total_cost,
    totalDurationMs: row.total_duration_ms,
    spanCount: row.span_count,
    sessionId: row.session_id,
    startedAt: row.started_at.toISOString(),
    endedAt: row.ended_at === null ? null : row.ended_at.toISOString(),
    environment: row.environment
  }
  if (row.input !== null) trace.input = unwrap(row.input)
  if (row.output !== null) trace.output = unwrap(row.output)
  if (row.metadata !== null) {
    trace.metadata = row.metadata
    // OTLP ingestion records the trace id there; a REST client may write anything under `otel`, so only an id is shown.
    const otelId = (row.metadata.otel as { trace_id?: unknown } | null | undefined)?.trace_id
    if (typeof otelId === "string" && OTEL_TRACE_ID.test(otelId)) trace.otelTraceId = otelId
  }
  if (row.lossy !== null) trace.lossy = row.lossy
  if (row.terminated_early !== null) trace.terminatedEarly = row.terminated_early
  return trace as TraceWire
}

const jsonOrNull = (value: unknown) => (value === undefined ? null : JSON.stringify(value))
const isoOrNull = (dt: DateTime.Utc | undefined) => (dt === undefined ? null : DateTime.formatIso(dt))

/** A position in the newest-first listing: the last row's start time and id. */
export interface ListPosition {
  readonly startedAt: string
  readonly id: string
}

/** What a listing is narrowed to; every field but `environment` is optional. */
export interface ListFilters {
  readonly environment: "production" | "sandbox"
  readonly status?: TraceStatus | undefined
  readonly projectId?: string | undefined
  readonly sessionId?: string | undefined
  /** Contained in the name, ignoring case. */
  readonly name?: string | undefined
  /** Used by at least one span. */
  readonly model?: string | undefined
  /** true: failed, or a span recorded an error; false: neither. */
  readonly hasError?: boolean | undefined
  /** Inclusive bounds on the start, ISO 8601. */
  readonly startedFrom?: string | undefined
  readonly startedTo?: string | undefined
  readonly minCost?: number | undefined
  readonly minDurationMs?: number | undefined
  /** A JSON object the trace's metadata contains (jsonb `@>`). */
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
}

export interface ListQuery extends ListFilters {
  readonly limit: number
  readonly offset: number
  readonly after: Option.Option<ListPosition>
  /** `capped`: count matches only up to `totalCap + 1`. */
  readonly total: "exact" | "capped"
  readonly totalCap: number
}

/** A LIKE pattern that matches `text` anywhere, its wildcards taken literally (backslash is LIKE's escape). */
export const containsPattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

/**
 * Traces and their spans. Every read and write is scoped to the account and skips soft-deleted traces, so
 * a foreign, deleted or missing trace is the same `TraceNotFound`.
 */
export class TraceRepo extends Effect.Service<TraceRepo>()("tapedeck/TraceRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const known = new KnownParts((yield* AppConfig).contentSweepGraceSeconds * 1000)

    /**
     * Inserts the trace and its spans in one statement (atomic without a transaction). Omitted totals are
     * derived from the spans. When `terminalJobId` is given the terminal-trace job is inserted with them.
     */
    const insert = Effect.fn("TraceRepo.insert")(
      function* (
        accountId: AccountId,
        request: CreateTraceRequest,
        terminalJobId: string | null,
        maxAttempts: number,
        options: {
          /** The live stream's CTEs (StreamEvents.inStatement, gated on `t`): its rows land in this same statement. */
          readonly stream?: { readonly ctes: Statement.Fragment; readonly columns: string }
          /** The digest of a cached API key the caller acts for: the statement writes nothing if it was revoked. */
          readonly liveKey?: string | null
        } = {}
      ) {
        const { stream, liveKey = null } = options
        const environment = request.metadata?.environment === "sandbox" ? "sandbox" : "production"
        const rows = yield* writeWithKnownParts(known, accountId, (stored, sent) =>
          withResolvedParts(
            sql,
            accountId,
            toWriteRecords(request.spans, stored, sent),
            (records) => sql<{
              id: string
              stream_row_ids?: ReadonlyArray<number | string> | null
            }>`${sql.literal(prepared("trace.insert"))}
          WITH x AS (
            SELECT * FROM json_to_recordset(${records}::json) AS x(${sql.literal(SPAN_RECORD_COLUMNS)})
          ), agg AS (
            SELECT ${sql.literal(SPAN_TOTALS)} FROM x
          ), t AS (
            INSERT INTO traces (id, account_id, project_id, name, status, input, output, total_tokens, total_cost,
                                total_duration_ms, tokens_explicit, cost_explicit, duration_explicit, span_count,
                                metadata, session_id, lossy, terminated_early, environment, started_at, ended_at, models,
                                has_error)
            SELECT ${request.id}::uuid, ${accountId}::uuid, ${request.project_id ?? null}::uuid, ${request.name ?? null}::text,
                   ${request.status}::text, ${jsonOrNull(request.input)}::jsonb, ${jsonOrNull(request.output)}::jsonb,
                   COALESCE(${request.total_tokens ?? null}::bigint, agg.tokens),
                   COALESCE(${request.total_cost ?? null}::numeric, agg.cost),
                   COALESCE(${request.total_duration_ms ?? null}::bigint, GREATEST(0, floor(EXTRACT(EPOCH FROM (
                     COALESCE(${isoOrNull(request.ended_at)}::timestamptz, agg.last_end, ${isoOrNull(request.started_at)}::timestamptz)
                     - ${isoOrNull(request.started_at)}::timestamptz)) * 1000))::bigint),
                   ${request.total_tokens !== undefined}::boolean, ${request.total_cost !== undefined}::boolean,
                   ${request.total_duration_ms !== undefined}::boolean, agg.n,
                   ${jsonOrNull(request.metadata)}::jsonb, ${request.session_id ?? null}::text,
                   ${request.lossy ?? null}::boolean, ${request.terminated_early ?? null}::boolean, ${environment}::text,
                   ${isoOrNull(request.started_at)}::timestamptz,
                   CASE WHEN ${request.status !== "running"}::boolean
                     THEN COALESCE(${isoOrNull(request.ended_at)}::timestamptz, agg.last_end, ${isoOrNull(request.started_at)}::timestamptz)
                     ELSE ${isoOrNull(request.ended_at)}::timestamptz END,
                   agg.models, agg.has_error
            FROM agg WHERE tapedeck_require_live_key(${liveKey}::text)
            ON CONFLICT (id) DO NOTHING
            RETURNING id
          ), s AS (
            INSERT INTO spans (trace_id, account_id, ${sql.literal(SPAN_WRITE_COLUMNS)})
            SELECT t.id, ${accountId}::uuid, ${sql.literal(SPAN_RECORD_VALUES)} FROM t, x
          ), j AS (
            INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts)
            SELECT ${terminalJobId}::uuid, ${accountId}::uuid, 'trace.terminal',
                   jsonb_build_object('traceId', t.id, 'status', ${request.status}::text), 'queued', ${maxAttempts}::int
            FROM t WHERE ${terminalJobId}::uuid IS NOT NULL
          ), k AS (
            -- search indexing (the search.index job), one job per write that has spans
            INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts)
            SELECT gen_random_uuid(), ${accountId}::uuid, 'search.index', jsonb_build_object('traceId', t.id), 'queued',
                   ${maxAttempts}::int
            FROM t WHERE EXISTS (SELECT 1 FROM x)
          )${stream?.ctes ?? sql``}
          SELECT id${sql.literal(stream === undefined ? "" : `, ${stream.columns}`)} FROM t`
          )
        )
        const row = rows[0]
        if (row === undefined) return yield* new TraceIdTaken({ traceId: request.id })
        return row
      },
      Effect.catchTags({ SqlError: revokedOrDie })
    )

    /** Links a stored trace to the fork whose replay produced it. */
    const markForkResult = Effect.fn("TraceRepo.markForkResult")(
      function* (traceId: TraceId, forkId: string) {
        yield* sql`UPDATE traces SET fork_id = ${forkId}, environment = 'sandbox' WHERE id = ${traceId}`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** A terminal fork result of the account with this id exists (a repeated create is answered "resumed"). */
    const isTerminalForkResult = Effect.fn("TraceRepo.isTerminalForkResult")(
      function* (accountId: AccountId, traceId: TraceId) {
        const rows = yield* sql`
          SELECT 1 FROM traces
          WHERE id = ${traceId} AND account_id = ${accountId} AND fork_id IS NOT NULL
            AND status <> 'running' AND deleted_at IS NULL`
        return rows.length > 0
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The trace's current status, locking its row for the caller's transaction. */
    const lockForUpdate = Effect.fn("TraceRepo.lockForUpdate")(
      function* (accountId: AccountId, traceId: TraceId) {
        const rows = yield* sql<{ status: TraceStatus }>`
          SELECT status FROM traces
          WHERE id = ${traceId} AND account_id = ${accountId} AND deleted_at IS NULL
          FOR UPDATE`
        const row = rows[0]
        if (row === undefined) return yield* new TraceNotFound({ traceId })
        return row.status
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Recomputes span_count and every total that the client did not set explicitly. */
    const recomputeTotals = Effect.fn("TraceRepo.recomputeTotals")(
      function* (traceId: TraceId) {
        yield* sql`
          UPDATE traces t SET
            span_count = agg.n, models = agg.models, has_error = agg.has_error,
            total_tokens = CASE WHEN t.tokens_explicit THEN t.total_tokens ELSE agg.tokens END,
            total_cost = CASE WHEN t.cost_explicit THEN t.total_cost ELSE agg.cost END,
            total_duration_ms = CASE WHEN t.duration_explicit THEN t.total_duration_ms ELSE GREATEST(0, floor(
              EXTRACT(EPOCH FROM (COALESCE(t.ended_at, agg.last_end, t.started_at) - t.started_at)) * 1000))::bigint END,
            updated_at = now()
          FROM (
            SELECT ${sql.literal(SPAN_TOTALS)} FROM spans WHERE trace_id = ${traceId}
          ) agg
          WHERE t.id = ${traceId}`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Applies a FinishTraceRequest to a locked trace. A terminal status without an end time ends it now. */
    const applyFinish = Effect.fn("TraceRepo.applyFinish")(
      function* (traceId: TraceId, request: FinishTraceRequest) {
        const terminal = request.status !== undefined && request.status !== "running"
        yield* sql`
          UPDATE traces SET
            status = COALESCE(${request.status ?? null}::text, status),
            output = CASE WHEN ${request.output !== undefined}::boolean THEN ${jsonOrNull(request.output)}::jsonb ELSE output END,
            ended_at = COALESCE(${isoOrNull(request.ended_at)}::timestamptz,
                                CASE WHEN ${terminal}::boolean THEN COALESCE(ended_at, now()) ELSE ended_at END),
            total_tokens = COALESCE(${request.total_tokens ?? null}::bigint, total_tokens),
            total_cost = COALESCE(${request.total_cost ?? null}::numeric, total_cost),
            total_duration_ms = COALESCE(${request.total_duration_ms ?? null}::bigint, total_duration_ms),
            tokens_explicit = tokens_explicit OR ${request.total_tokens !== undefined}::boolean,
            cost_explicit = cost_explicit OR ${request.total_cost !== undefined}::boolean,
            duration_explicit = duration_explicit OR ${request.total_duration_ms !== undefined}::boolean,
            lossy = COALESCE(${request.lossy ?? null}::boolean, lossy),
            terminated_early = COALESCE(${request.terminated_early ?? null}::boolean, terminated_early),
            updated_at = now()
          WHERE id = ${traceId}`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The trace's stored spans: id → parent id. */
    const parentsOf = Effect.fn("TraceRepo.parentsOf")(
      function* (traceId: TraceId) {
        const rows = yield* sql<{ id: string; parent_id: string | null }>`
          SELECT id, parent_id FROM spans WHERE trace_id = ${traceId}`
        return new Map(rows.map((r) => [r.id, r.parent_id]))
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Inserts the spans, replacing stored spans with the same id (a re-send is idempotent). */
    const upsertSpans = Effect.fn("TraceRepo.upsertSpans")(
      function* (accountId: AccountId, traceId: TraceId, spans: ReadonlyArray<Span>) {
        yield* writeWithKnownParts(known, accountId, (stored, sent) =>
          withResolvedParts(
            sql,
            accountId,
            toWriteRecords(spans, stored, sent),
            (records) => sql`
          INSERT INTO spans (trace_id, account_id, ${sql.literal(SPAN_WRITE_COLUMNS)})
          SELECT ${traceId}::uuid, ${accountId}::uuid, ${sql.literal(SPAN_RECORD_VALUES)}
          FROM json_to_recordset(${records}::json) AS x(${sql.literal(SPAN_RECORD_COLUMNS)})
          ${sql.literal(SPAN_UPSERT)}`
          )
        )
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const findTrace = Effect.fn("TraceRepo.findTrace")(
      function* (accountId: AccountId, traceId: TraceId) {
        const rows = yield* sql<TraceRow>`
          SELECT ${sql.literal(TRACE_SELECT)} FROM traces
          WHERE id = ${traceId} AND account_id = ${accountId} AND deleted_at IS NULL`
        const row = rows[0]
        if (row === undefined) return yield* new TraceNotFound({ traceId })
        return toTrace(row)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const listSpans = Effect.fn("TraceRepo.listSpans")(
      function* (traceId: TraceId) {
        const rows = yield* sql<SpanRow>`SELECT ${sql.literal(SPAN_SELECT)} FROM spans WHERE trace_id = ${traceId}`
        return (yield* readSpans(sql, rows)).map((r) => r.span)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * The account's spans of the trace as JSON text (SpanRecords.spanJsonRow), for answers that pass them through
     * unparsed. Scoped to the account as well as the trace, whose lookup checks ownership first.
     */
    const listSpansJson = Effect.fn("TraceRepo.listSpansJson")(
      function* (accountId: AccountId, traceId: TraceId) {
        const rows = yield* sql<SpanPartsRow>`
          SELECT ${sql.literal(SPAN_PARTS_SELECT)} FROM spans WHERE trace_id = ${traceId} AND account_id = ${accountId}`
        return (yield* withPayloads(sql, rows)).map(spanJsonRow)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * The conditions of a listing. The error condition is written as the partial index `traces_errors` states it
     * (migration 0019), so the planner can use that index.
     */
    const listConditions = (accountId: AccountId, f: ListFilters): Array<Statement.Fragment> => {
      const conditions = [sql`account_id = ${accountId}`, sql`environment = ${f.environment}`, sql`deleted_at IS NULL`]
      if (f.status !== undefined) conditions.push(sql`status = ${f.status}`)
      if (f.projectId !== undefined) conditions.push(sql`project_id = ${f.projectId}::uuid`)
      if (f.sessionId !== undefined) conditions.push(sql`session_id = ${f.sessionId}`)
      if (f.name !== undefined) conditions.push(sql`name ILIKE ${containsPattern(f.name)}`)
      if (f.model !== undefined) conditions.push(sql`models @> ARRAY[${f.model}::text]`)
      if (f.hasError === true) conditions.push(sql`(has_error OR status = 'failed')`)
      if (f.hasError === false) conditions.push(sql`NOT has_error AND status <> 'failed'`)
      if (f.startedFrom !== undefined) conditions.push(sql`started_at >= ${f.startedFrom}::timestamptz`)
      if (f.startedTo !== undefined) conditions.push(sql`started_at <= ${f.startedTo}::timestamptz`)
      if (f.minCost !== undefined) conditions.push(sql`total_cost >= ${String(f.minCost)}::numeric`)
      if (f.minDurationMs !== undefined) conditions.push(sql`total_duration_ms >= ${f.minDurationMs}::bigint`)
      if (f.metadata !== undefined) conditions.push(sql`metadata @> ${JSON.stringify(f.metadata)}::jsonb`)
      return conditions
    }

    /** A page of the account's traces, newest first (start time, then id), plus the total (exact, or capped). */
    const list = Effect.fn("TraceRepo.list")(
      function* (accountId: AccountId, query: ListQuery) {
        const conditions = listConditions(accountId, query)
        const after = Option.match(query.after, {
          onNone: () => conditions,
          onSome: (p) => [...conditions, sql`(started_at, id) < (${p.startedAt}::timestamptz, ${p.id}::uuid)`]
        })
        const [rows, totals] = yield* Effect.all(
          [
            sql<TraceRow>`
            SELECT ${sql.literal(TRACE_SELECT)} FROM traces
            WHERE ${sql.and(after)}
            ORDER BY started_at DESC, id DESC
            LIMIT ${query.limit + 1} OFFSET ${query.offset}`,
            query.total === "exact"
              ? sql<{ n: number }>`SELECT count(*)::float8 AS n FROM traces WHERE ${sql.and(conditions)}`
              : sql<{ n: number }>`
              SELECT count(*)::float8 AS n FROM (SELECT 1 FROM traces WHERE ${sql.and(conditions)} LIMIT ${query.totalCap + 1}) m`
          ],
          { concurrency: 2 }
        )
        return {
          items: rows.slice(0, query.limit).map(toTrace),
          hasMore: rows.length > query.limit,
          total: totals[0]?.n ?? 0
        }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Soft delete; the retention job removes the rows later. */
    const softDelete = Effect.fn("TraceRepo.softDelete")(
      function* (accountId: AccountId, traceId: TraceId) {
        const rows = yield* sql`
          UPDATE traces SET deleted_at = now(), updated_at = now()
          WHERE id = ${traceId} AND account_id = ${accountId} AND deleted_at IS NULL
          RETURNING id`
        if (rows.length === 0) return yield* new TraceNotFound({ traceId })
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Removes up to `batch` traces soft-deleted more than `days` ago, with their spans; the number removed.
     * SKIP LOCKED lets several instances purge at once without waiting on each other.
     */
    const purgeDeleted = Effect.fn("TraceRepo.purgeDeleted")(
      function* (days: number, batch: number) {
        const rows = yield* sql<{ id: string }>`
          WITH doomed AS (
            SELECT id FROM traces
            WHERE deleted_at IS NOT NULL AND deleted_at < now() - make_interval(secs => ${days * 86400})
            LIMIT ${batch}
            FOR UPDATE SKIP LOCKED
          ), gone_spans AS (
            DELETE FROM spans WHERE trace_id IN (SELECT id FROM doomed)
          ), gone_embeddings AS (
            DELETE FROM span_embeddings WHERE trace_id IN (SELECT id FROM doomed)
          )
          DELETE FROM traces WHERE id IN (SELECT id FROM doomed)
          RETURNING id`
        return rows.length
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return {
      insert,
      markForkResult,
      isTerminalForkResult,
      lockForUpdate,
      recomputeTotals,
      applyFinish,
      parentsOf,
      upsertSpans,
      findTrace,
      listSpans,
      listSpansJson,
      list,
      softDelete,
      purgeDeleted
    } as const
  })
}) {}
