import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Option, Schema } from "effect"
import { decodeCursor, encodeCursor } from "#src/domain/Cursor"
import type { AccountId, TraceId } from "#src/domain/Ids"
import type { Span, SpanWire } from "#src/domain/Span"
import { batchProblem } from "#src/domain/SpanBatch"
import { layOut, type SpanTiming } from "#src/domain/CausalOrder"
import {
  type CreateTraceRequest,
  type FinishTraceRequest,
  isTerminal,
  type ListTracesParams,
  OtelTraceId,
  TOTAL_CAP,
  type TraceDetailWire,
  type TraceListWire,
  type TraceWire
} from "#src/domain/Trace"
import { AppConfig } from "../config/AppConfig.ts"
import { accountNamespace, traceUuid } from "../ingest/OtlpIds.ts"
import { JobQueue } from "../jobs/JobQueue.ts"
import { ModelPrices } from "../llm/Prices.ts"
import { STREAM_RESULT_COLUMNS, StreamEvents } from "../stream/StreamEvents.ts"
import type { SpanJsonRow } from "./SpanRecords.ts"
import { TraceRepo } from "./TraceRepo.ts"
import { rewrittenSpanCode } from "#src/domain/StreamEvent"
import { InvalidCursor, SpansRejected, TraceNotRunning } from "#src/domain/Errors"
import { processDecodedSpans, SpanProcessors } from "../extensions/SpanProcessors.ts"

const isOtelTraceId = Schema.is(OtelTraceId)

const timing = (span: SpanWire) => {
  const startMs = Date.parse(span.started_at)
  const endMs = span.ended_at !== undefined ? Date.parse(span.ended_at) : startMs + (span.duration_ms ?? 0)
  return { id: span.id, parentId: span.parent_id, startMs, endMs }
}

/** Orders spans by start time, then causal position, and lays out the trace's causal metadata. */
export const detailOf = (spans: ReadonlyArray<SpanWire>) => {
  const { order, layout } = detailOrder(spans.map(timing))
  return {
    spans: order.map((i) => spans[i]!),
    causalOrder: layout.causalOrder,
    concurrentGroups: layout.concurrentGroups
  }
}

/** The detail's span order (indices into `timings`: start time, then causal position) and causal layout. */
const detailOrder = (timings: ReadonlyArray<SpanTiming>) => {
  const layout = layOut(timings)
  const position = new Map(layout.causalOrder.map((id, i) => [id, i]))
  const order = timings.map((t, i) => ({ i, startMs: t.startMs, position: position.get(t.id)! }))
  order.sort((a, b) => a.startMs - b.startMs || a.position - b.position)
  return { order: order.map(({ i }) => i), layout }
}

/**
 * The detail as JSON text, the spans' payloads passed through as PostgreSQL printed them: the same document
 * as `JSON.stringify({ ...trace, ...detailOf(spans) })` without parsing and re-serialising every payload.
 */
export const detailJson = (trace: TraceWire, spans: ReadonlyArray<SpanJsonRow>) => {
  const { order, layout } = detailOrder(
    spans.map((s) => ({
      id: s.id,
      parentId: s.parent_id,
      startMs: s.start_ms,
      endMs: s.end_ms ?? s.start_ms + (s.duration_ms ?? 0)
    }))
  )
  const head = JSON.stringify(trace)
  const parts: Array<string> = [head.length > 2 ? `${head.slice(0, -1)},"spans":[` : `{"spans":[`]
  order.forEach((i, n) => parts.push(n === 0 ? spans[i]!.json : `,${spans[i]!.json}`))
  parts.push(
    `],"causalOrder":${JSON.stringify(layout.causalOrder)},"concurrentGroups":${JSON.stringify(layout.concurrentGroups)}}`
  )
  return parts.join("")
}

/**
 * The Traces API over storage: validation beyond the schema (span ids and parents), the transactional
 * writes, and the terminal-trace job, enqueued once per transition into completed or failed.
 */
export class Traces extends Effect.Service<Traces>()("tapedeck/Traces", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* TraceRepo
    const jobs = yield* JobQueue
    const config = yield* AppConfig
    const stream = yield* StreamEvents
    const prices = yield* ModelPrices
    /** Spans sent without a cost get the price table's estimate (marked `cost_estimated`); sent costs stay. */
    const priced = (spans: ReadonlyArray<Span>) => spans.map(prices.withEstimatedCost)
    const processors = yield* SpanProcessors
    /** The installed span processors (extensions) over a batch, before anything of it is checked or stored. */
    const processed = (accountId: AccountId, traceId: string, spans: ReadonlyArray<Span>) =>
      processors.length === 0 || spans.length === 0
        ? Effect.succeed(spans)
        : processDecodedSpans(processors, spans, { accountId, traceId, path: "rest" })

    /** `liveKey`: the digest of a cached API key the caller acts for, re-checked by the insert (see TraceRepo.insert). */
    const create = Effect.fn("Traces.create")(function* (
      accountId: AccountId,
      received: CreateTraceRequest,
      liveKey: string | null = null
    ) {
      const sent = { ...received, spans: yield* processed(accountId, received.id, received.spans) }
      const problem = batchProblem(sent.spans)
      if (problem) return yield* new SpansRejected({ reason: problem })
      const request = { ...sent, spans: priced(sent.spans) }
      const jobId = isTerminal(request.status) ? crypto.randomUUID() : null
      // One statement writes the trace, its spans, its jobs and the live stream's row (atomic, no transaction).
      const events = stream.inStatement(
        accountId,
        [
          {
            t: request.id,
            b: "created",
            s: request.spans.map((span) => [span.id, "c"] as const),
            ...(isTerminal(request.status) ? { a: "terminal" as const } : {})
          }
        ],
        "t"
      )
      const created = yield* repo
        .insert(accountId, request, jobId, config.jobMaxAttempts, {
          stream: { ctes: events, columns: STREAM_RESULT_COLUMNS },
          liveKey
        })
        .pipe(
          Effect.tap((row) => stream.published(accountId, { stream_row_ids: row.stream_row_ids ?? null })),
          Effect.as(true),
          // A repeated create of a finished fork result (an SDK resuming after a crash) is not a conflict.
          Effect.catchTag("TraceIdTaken", (e) =>
            repo
              .isTerminalForkResult(accountId, request.id)
              .pipe(Effect.flatMap((resumed) => (resumed ? Effect.succeed(false) : Effect.fail(e))))
          )
        )
      return {
        status: created ? ("created" as const) : ("resumed" as const),
        jobId: Option.fromNullable(created ? jobId : null)
      }
    })

    const finish = Effect.fn("Traces.finish")(
      function* (accountId: AccountId, traceId: TraceId, request: FinishTraceRequest) {
        const previous = yield* repo.lockForUpdate(accountId, traceId)
        yield* repo.applyFinish(traceId, request)
        yield* repo.recomputeTotals(traceId)
        const next = request.status ?? previous
        const terminalTransition = next !== previous && isTerminal(next)
        yield* stream.record(accountId, [{ t: traceId, s: [], a: terminalTransition ? "terminal" : "updated" }])
        if (!terminalTransition) return { jobId: Option.none<string>() }
        const jobId = yield* jobs.enqueue(accountId, "trace.terminal", { traceId, status: next })
        return { jobId: Option.some<string>(jobId) }
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: Effect.die })
    )

    const appendSpans = Effect.fn("Traces.appendSpans")(
      function* (accountId: AccountId, traceId: TraceId, received: ReadonlyArray<Span>) {
        const sent = yield* processed(accountId, traceId, received)
        const status = yield* repo.lockForUpdate(accountId, traceId)
        if (status !== "running") return yield* new TraceNotRunning({ traceId, status })
        const stored = yield* repo.parentsOf(traceId)
        const problem = batchProblem(sent, stored)
        if (problem) return yield* new SpansRejected({ reason: problem })
        const spans = priced(sent)
        if (spans.length > 0) {
          yield* repo.upsertSpans(accountId, traceId, spans)
          yield* repo.recomputeTotals(traceId)
          yield* jobs.enqueue(accountId, "search.index", { traceId })
          yield* stream.record(accountId, [
            {
              t: traceId,
              s: spans.map((span) => [span.id, stored.has(span.id) ? rewrittenSpanCode(span) : "c"] as const),
              a: "updated"
            }
          ])
        }
        const trace = yield* repo.findTrace(accountId, traceId)
        return { spansWritten: spans.length, spanCount: trace.spanCount ?? 0 }
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: Effect.die })
    )

    const get = Effect.fn("Traces.get")(function* (accountId: AccountId, traceId: TraceId) {
      const trace = yield* repo.findTrace(accountId, traceId)
      const spans = yield* repo.listSpans(traceId)
      return { ...trace, ...detailOf(spans) } satisfies TraceDetailWire
    })

    /**
     * `get` as the JSON text of the TraceDetail (the HTTP route's body). An OpenTelemetry trace id names the trace OTLP
     * ingestion stored it as for this account: its id is derived from the account and the OTel id (OtlpIds), so no
     * lookup is needed and another account's trace with the same OTel id is never reached.
     */
    const getJson = Effect.fn("Traces.getJson")(function* (accountId: AccountId, id: TraceId | OtelTraceId) {
      const traceId = isOtelTraceId(id) ? (traceUuid(accountNamespace(accountId), id) as TraceId) : id
      // Both reads at once (two pooled connections): the spans' read is scoped to the account too, so it returns
      // nothing another account could see, and is discarded when the trace is missing or deleted.
      const [trace, spans] = yield* Effect.all(
        [repo.findTrace(accountId, traceId), repo.listSpansJson(accountId, traceId)],
        { concurrency: 2 }
      )
      return detailJson(trace, spans)
    })

    const list = Effect.fn("Traces.list")(function* (accountId: AccountId, params: ListTracesParams) {
      const after = params.cursor === undefined ? Option.none() : decodeCursor(params.cursor)
      if (params.cursor !== undefined && Option.isNone(after)) return yield* new InvalidCursor()
      const page = yield* repo.list(accountId, {
        environment: params.environment ?? params.env ?? "production",
        status: params.status,
        projectId: params.project_id,
        sessionId: params.session_id,
        name: params.name,
        model: params.model,
        hasError: params.has_error,
        startedFrom: params.date_from === undefined ? undefined : DateTime.formatIso(params.date_from),
        startedTo: params.date_to === undefined ? undefined : DateTime.formatIso(params.date_to),
        minCost: params.min_cost,
        minDurationMs: params.min_duration_ms,
        metadata: params.metadata,
        limit: params.limit,
        offset: params.offset,
        after,
        total: params.total,
        totalCap: TOTAL_CAP
      })
      const last = page.items.at(-1)
      return {
        items: page.items,
        total: page.total,
        limit: params.limit,
        offset: params.offset,
        hasMore: page.hasMore,
        ...(page.hasMore && last ? { nextCursor: encodeCursor({ startedAt: last.startedAt, id: last.id }) } : {})
      } satisfies TraceListWire
    })

    const remove = Effect.fn("Traces.remove")(
      function* (accountId: AccountId, traceId: TraceId) {
        yield* repo.softDelete(accountId, traceId)
        yield* stream.record(accountId, [{ t: traceId, s: [], a: "deleted" }])
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * A span the service itself adds to an owned trace, whatever its status (an enforcement block or hold): stored,
     * totalled, indexed for search and streamed like any other. `TraceNotFound` when the trace is not the account's.
     */
    const annotate = Effect.fn("Traces.annotate")(
      function* (accountId: AccountId, traceId: TraceId, span: Span) {
        yield* repo.lockForUpdate(accountId, traceId)
        yield* repo.upsertSpans(accountId, traceId, [span])
        yield* repo.recomputeTotals(traceId)
        yield* jobs.enqueue(accountId, "search.index", { traceId })
        yield* stream.record(accountId, [{ t: traceId, s: [[span.id, "c"] as const], a: "updated" }])
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { create, finish, appendSpans, annotate, get, getJson, list, remove } as const
  }),
  dependencies: [TraceRepo.Default, JobQueue.Default, AppConfig.Default, StreamEvents.Default, ModelPrices.Default]
}) {}
