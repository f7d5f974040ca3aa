import { SqlClient, type SqlError } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"
import type { DecodedExport } from "#src/domain/Otlp"
import type { TraceStatus } from "#src/domain/Trace"
import { JobQueue, type NewJob } from "../jobs/JobQueue.ts"
import { ModelPrices } from "../llm/Prices.ts"
import { UsageCounters } from "../usage/UsageCounters.ts"
import { revokedOrDie } from "../storage/ApiKeyRepo.ts"
import { copyMessage } from "../storage/PgCopy.ts"
import type { MappedSpan } from "#src/domain/genai/MapSpan"
import { byTrace, finalizeWith, mapAll, type PreparedExport, traceStarts } from "./OtlpPrepare.ts"
import { OtlpStore } from "./OtlpStore.ts"
import { type ProcessedSpan, processSpansJson, SpanProcessors } from "../extensions/SpanProcessors.ts"
import { STREAM_RESULT_COLUMNS, type StreamResultColumns, StreamEvents } from "../stream/StreamEvents.ts"
import { rewrittenSpanCode, type StreamGroup } from "#src/domain/StreamEvent"
import type { StoredSpan, TraceFinalization } from "#src/domain/genai/TraceFinalize"

export interface IngestResult {
  readonly tracesCreated: number
  readonly spansIngested: number
  readonly rejectedSpans: number
  readonly errorMessage: string | undefined
  /** The request was counted in the account's usage (`otlp_requests`) by the write's own transaction. */
  readonly counted: boolean
}

const groupBy = <A>(items: ReadonlyArray<A>, key: (a: A) => string): Array<[string, Array<A>]> => {
  const groups = new Map<string, Array<A>>()
  for (const item of items) {
    const k = key(item)
    const group = groups.get(k)
    if (group) group.push(item)
    else groups.set(k, [item])
  }
  return [...groups]
}

const isTerminal = (status: TraceStatus) => status !== "running"

/** What a write did; `counted`: it counted the request in the account's usage (it announced something). */
interface Written {
  readonly tracesCreated: number
  readonly spansIngested: number
  readonly refused: number
  readonly counted: boolean
}

const NOTHING_WRITTEN: Written = { tracesCreated: 0, spansIngested: 0, refused: 0, counted: false }

const resultOf = (written: Written, rejected: number, reasons: Set<string>): IngestResult => {
  if (written.refused > 0) reasons.add("spans of a trace that was deleted, or that another account owns, were refused")
  const rejectedSpans = rejected + written.refused
  return {
    tracesCreated: written.tracesCreated,
    spansIngested: written.spansIngested,
    rejectedSpans,
    errorMessage: rejectedSpans > 0 ? [...reasons].join("; ") : undefined,
    counted: written.counted
  }
}

type Locks = Effect.Effect.Success<ReturnType<OtlpStore["createAndLock"]>>

/**
 * Writes an OTLP export: traces created on their first span; each touched trace finalized from its stored
 * spans and this request's (names, status, agent inheritance, usage); then the spans upserted with their
 * final values (a re-sent batch changes nothing) and the totals recomputed. One transaction: a 200 means every
 * counted span is committed. A trace that became terminal enqueues its terminal job once, in the same transaction.
 *
 * An export prepared on another thread (`ingestPrepared`: mapped, finalized and encoded as if all its traces were
 * new) is written as is when they all were; otherwise it is mapped again here and written the general way.
 */
export class OtlpIngest extends Effect.Service<OtlpIngest>()("tapedeck/OtlpIngest", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* OtlpStore
    const jobs = yield* JobQueue
    const stream = yield* StreamEvents
    const prices = yield* ModelPrices
    const usage = yield* UsageCounters

    const requireLiveKey = (liveKey: string | null): Effect.Effect<void, SqlError.SqlError> =>
      liveKey === null ? Effect.void : Effect.asVoid(sql`SELECT tapedeck_require_live_key(${liveKey}::text)`)

    /**
     * The stream rows, terminal jobs and search-indexing job of the traces written, and the request counted in the
     * account's usage: one statement, the last of the write's transaction. Whether it counted the request.
     * `liveKey` (the digest of an API key verified from this instance's cache): the statement fails, undoing the
     * whole write, if the key was revoked since (`tapedeck_require_live_key`); a write announcing nothing checks
     * it alone.
     */
    const announce = Effect.fn("OtlpIngest.announce")(function* (
      accountId: AccountId,
      groups: ReadonlyArray<StreamGroup>,
      terminal: ReadonlyArray<{ traceId: string; status: TraceStatus }>,
      liveKey: string | null
    ) {
      if (groups.length === 0) {
        yield* requireLiveKey(liveKey)
        return false
      }
      const jobRows = yield* jobs.inStatement(accountId, [
        ...terminal.flatMap(
          ({ status, traceId }): Array<NewJob> =>
            status === "running" ? [] : [{ kind: "trace.terminal", payload: { traceId, status } }]
        ),
        // One search-indexing job per export (embedding happens off the hot path).
        { kind: "search.index", payload: { traceIds: groups.map((g) => g.t) } }
      ])
      const counted = yield* usage.inStatement(accountId, "otlp_requests")
      const gate = sql`SELECT 1 WHERE tapedeck_require_live_key(${liveKey}::text)`
      const rows = yield* sql<StreamResultColumns>`
        WITH stream_gate AS (${gate})${stream.inStatement(accountId, groups, "stream_gate")}${jobRows}${counted}
        SELECT ${sql.literal(STREAM_RESULT_COLUMNS)}`
      yield* stream.published(accountId, rows[0]!)
      return true
    })

    /** Writes the spans once their traces are created and locked (`locks`, from createAndLock in this transaction). */
    const writeLocked = Effect.fn("OtlpIngest.writeLocked")(function* (
      accountId: AccountId,
      spans: ReadonlyArray<MappedSpan>,
      { created, locked }: Locks,
      liveKey: string | null
    ) {
      const writable = (traceId: string) => {
        const row = locked.get(traceId)
        return row !== undefined && row.accountId === accountId && !row.deleted
      }
      const own = spans.filter((m) => writable(m.traceId))
      const incoming = byTrace(own)
      const traceIds = [...incoming.keys()]
      // Finalize before writing: the spans of this request get their final agent fields and usage in the
      // one INSERT, and only spans stored earlier that the pass changes are updated.
      // A trace created by this request has no stored spans yet (nobody else can write it before we commit).
      const stored = yield* store.spansOf(traceIds.filter((id) => !created.has(id)))
      const finalOwn: Array<MappedSpan> = []
      const updates: Array<Parameters<typeof store.applySpanUpdates>[0][number]> = []
      const traces: Array<{ id: string; trace: TraceFinalization["trace"] }> = []
      for (const [id, fresh] of incoming) {
        // fromRow leaves absent fields absent (never undefined), which is what StoredSpan means.
        const earlier = ((stored.get(id) ?? []) as ReadonlyArray<StoredSpan>).filter((s) => !fresh.has(s.id))
        const finalized = finalizeWith(earlier, fresh, prices.table)
        finalOwn.push(...finalized.spans)
        for (const update of finalized.earlierUpdates) updates.push({ ...update, traceId: id })
        traces.push({ id, trace: finalized.trace })
      }
      yield* store.insertNewSpans(
        accountId,
        finalOwn.filter((m) => created.has(m.traceId))
      )
      yield* store.upsertSpans(
        accountId,
        finalOwn.filter((m) => !created.has(m.traceId))
      )
      yield* store.applySpanUpdates(updates)
      yield* store.applyTraces(traces)
      const becameTerminal = ({ id, trace }: (typeof traces)[number]) =>
        trace.status !== locked.get(id)!.status && isTerminal(trace.status)
      // The live stream's events, in the same transaction: one row for the whole request.
      const counted = yield* announce(
        accountId,
        traces.map((t): StreamGroup => {
          const earlier = new Set((stored.get(t.id) ?? []).map((s) => s.id))
          return {
            t: t.id,
            ...(created.has(t.id) ? { b: "created" as const } : {}),
            s: [...incoming.get(t.id)!.values()].map(
              (m) => [m.span.id, earlier.has(m.span.id) ? rewrittenSpanCode(m.span) : "c"] as const
            ),
            a: becameTerminal(t) ? "terminal" : "updated"
          }
        }),
        traces.filter(becameTerminal).map(({ id, trace }) => ({ traceId: id, status: trace.status })),
        liveKey
      )
      return {
        tracesCreated: traceIds.filter((id) => created.has(id)).length,
        spansIngested: own.length,
        refused: spans.length - own.length,
        counted
      }
    })

    const write = Effect.fn("OtlpIngest.write")(
      function* (accountId: AccountId, spans: ReadonlyArray<MappedSpan>, liveKey: string | null) {
        const locks = yield* store.createAndLock(accountId, [...traceStarts(spans).values()])
        return yield* writeLocked(accountId, spans, locks, liveKey)
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: revokedOrDie })
    )

    /** An export with nothing to write: its cached key is still re-checked, as a write's statement would. */
    const nothingWritten = (liveKey: string | null) =>
      requireLiveKey(liveKey).pipe(Effect.as(NOTHING_WRITTEN), Effect.catchTags({ SqlError: revokedOrDie }))

    const processors = yield* SpanProcessors
    /** The installed span processors (extensions), one trace's spans at a time, before anything is written. */
    const processed = (accountId: AccountId, mapped: ReadonlyArray<MappedSpan>) =>
      processors.length === 0
        ? Effect.succeed(mapped)
        : Effect.forEach(
            groupBy(mapped, (m) => m.traceId),
            ([traceId, group]) =>
              processSpansJson(
                processors,
                group.map((m) => m.span as ProcessedSpan),
                { accountId, traceId, path: "otlp" }
              ).pipe(
                Effect.map((spans) =>
                  spans.map((span): MappedSpan => ({ ...group[0]!, span: span as MappedSpan["span"] }))
                )
              )
          ).pipe(Effect.map((groups) => groups.flat()))

    /** `liveKey`: see `announce` (null when the caller's key was looked up just now). */
    const ingest = Effect.fn("OtlpIngest.ingest")(function* (
      accountId: AccountId,
      decoded: DecodedExport,
      liveKey: string | null = null
    ) {
      // The mapped spans may share values unless a processor is given them (it may change them in place).
      const mappedExport = mapAll(accountId, decoded, processors.length === 0)
      const { reasons, rejected } = mappedExport
      const spans = yield* processed(accountId, mappedExport.spans)
      const written = spans.length === 0 ? yield* nothingWritten(liveKey) : yield* write(accountId, spans, liveKey)
      return resultOf(written, rejected, reasons)
    })

    /**
     * Writes a prepared export (see the class comment); `decoded` gives the export again when a trace already
     * existed, or when this connection cannot COPY.
     */
    const writePrepared = Effect.fn("OtlpIngest.writePrepared")(
      function* (accountId: AccountId, prepared: PreparedExport, decoded: () => DecodedExport, liveKey: string | null) {
        // New traces go in with their final fields and totals; when one was not new, writeLocked rewrites them all.
        const locks = yield* store.createFinalAndLock(accountId, prepared.traces)
        const allNew = prepared.traces.every((t) => locks.created.has(t.id))
        if (!allNew || !(yield* store.copyRows(() => copyMessage(prepared.copy)))) {
          const { reasons, rejected, spans } = mapAll(accountId, decoded(), true)
          return resultOf(yield* writeLocked(accountId, spans, locks, liveKey), rejected, reasons)
        }
        const terminal = prepared.traces.filter((t) => isTerminal(t.trace.status))
        const counted = yield* announce(
          accountId,
          prepared.traces.map(
            (t): StreamGroup => ({
              t: t.id,
              b: "created",
              s: t.spanIds.map((id) => [id, "c"] as const),
              a: isTerminal(t.trace.status) ? "terminal" : "updated"
            })
          ),
          terminal.map((t) => ({ traceId: t.id, status: t.trace.status })),
          liveKey
        )
        const written = {
          tracesCreated: prepared.traces.length,
          spansIngested: prepared.spanCount,
          refused: 0,
          counted
        }
        return resultOf(written, prepared.rejected, new Set(prepared.reasons))
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: revokedOrDie })
    )

    const ingestPrepared = Effect.fn("OtlpIngest.ingestPrepared")(function* (
      accountId: AccountId,
      prepared: PreparedExport,
      decoded: () => DecodedExport,
      liveKey: string | null = null
    ) {
      // A prepared export was encoded for storage on another thread, before any processor could see it.
      if (processors.length > 0) return yield* ingest(accountId, decoded(), liveKey)
      if (prepared.spanCount > 0) return yield* writePrepared(accountId, prepared, decoded, liveKey)
      return resultOf(yield* nothingWritten(liveKey), prepared.rejected, new Set(prepared.reasons))
    })

    return { ingest, ingestPrepared } as const
  }),
  dependencies: [OtlpStore.Default, JobQueue.Default, StreamEvents.Default, ModelPrices.Default, UsageCounters.Default]
}) {}
