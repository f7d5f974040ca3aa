import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"
import type { DecodedExport } from "#src/domain/Otlp"
import type { TraceStatus } from "#src/domain/Trace"
import { TERMINAL_TRACE_JOB } from "../events/TerminalTraceHook.ts"
import { JobQueue } from "../jobs/JobQueue.ts"
import { SEARCH_INDEX_JOB } from "../search/Search.ts"
import { type MappedSpan, mapSpan } from "./GenAiMapping.ts"
import { OtlpStore } from "./OtlpStore.ts"
import { StreamEvents } from "../stream/StreamEvents.ts"
import { rewrittenSpanCode, type StreamGroup } from "#src/domain/StreamEvent"
import { accountNamespace } from "./OtlpIds.ts"
import { finalizeTrace, type StoredSpan } from "./TraceFinalize.ts"

/** At most this many spans are created per request (SPEC §4); the rest are refused through partialSuccess. */
export const MAX_SPANS_PER_EXPORT = 2000

export interface IngestResult {
  readonly tracesCreated: number
  readonly spansIngested: number
  readonly rejectedSpans: number
  readonly errorMessage: string | undefined
}

const isTerminal = (status: TraceStatus) => status !== "running"

/** Maps the decoded spans in document order, applying the cap; the spans to write and what was refused. */
const mapAll = (accountId: AccountId, decoded: DecodedExport) => {
  const accountNs = accountNamespace(accountId)
  const reasons = new Set(decoded.rejected.map((r) => r.reason))
  let rejected = decoded.rejected.length
  // The last copy of a span sent twice in one request wins, as it would across requests.
  const byKey = new Map<string, MappedSpan>()
  const kept = new Set<string>()
  for (const span of decoded.spans) {
    // The cap is applied before mapping: spans past it cost a count, not a mapping.
    const otelKey = `${span.traceId}/${span.spanId}`
    if (!kept.has(otelKey) && kept.size >= MAX_SPANS_PER_EXPORT) {
      rejected++
      reasons.add(`more than ${MAX_SPANS_PER_EXPORT} spans in one request: lower the exporter's batch size`)
      continue
    }
    kept.add(otelKey)
    let mapped: MappedSpan | undefined
    try {
      mapped = mapSpan(accountNs, span)
    } catch {
      rejected++
      reasons.add("a span could not be mapped")
      continue
    }
    if (mapped === undefined) continue
    byKey.set(`${mapped.traceId}/${mapped.span.id}`, mapped)
  }
  return { spans: [...byKey.values()], rejected, reasons }
}

/**
 * Writes an OTLP export: traces created on their first span; each touched trace finalized from its stored
 * spans and this request's (names, status, agent inheritance, usage); then the spans upserted with their
 * final values (a re-sent batch changes nothing) and the totals recomputed. One transaction: a 200 means every counted span is committed. A trace that became
 * terminal enqueues its terminal job once, in the same transaction.
 */
export class OtlpIngest extends Effect.Service<OtlpIngest>()("tapedeck/OtlpIngest", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const store = yield* OtlpStore
    const jobs = yield* JobQueue
    const stream = yield* StreamEvents

    const write = Effect.fn("OtlpIngest.write")(
      function*(accountId: AccountId, spans: ReadonlyArray<MappedSpan>) {
        const starts = new Map<string, { id: string; startedAt: string; otelTraceId: string }>()
        for (const m of spans) {
          const known = starts.get(m.traceId)
          if (!known || m.span.started_at < known.startedAt) {
            starts.set(m.traceId, { id: m.traceId, startedAt: m.span.started_at, otelTraceId: m.otelTraceId })
          }
        }
        const { created, locked } = yield* store.createAndLock(accountId, [...starts.values()])
        const writable = (traceId: string) => {
          const row = locked.get(traceId)
          return row !== undefined && row.accountId === accountId && !row.deleted
        }
        const own = spans.filter((m) => writable(m.traceId))
        const traceIds = [...new Set(own.map((m) => m.traceId))]
        // Finalize before writing: the spans of this request get their final agent fields and usage in the
        // one INSERT, and only spans stored earlier that the pass changes are updated.
        // A trace created by this request has no stored spans yet (nobody else can write it before we commit).
        const stored = yield* store.spansOf(traceIds.filter((id) => !created.has(id)))
        const incoming = new Map<string, Map<string, MappedSpan>>()
        for (const m of own) {
          const byId = incoming.get(m.traceId) ?? new Map<string, MappedSpan>()
          byId.set(m.span.id, m)
          incoming.set(m.traceId, byId)
        }
        const finalOwn: Array<MappedSpan> = []
        const updates: Array<Parameters<typeof store.applySpanUpdates>[0][number]> = []
        const traces: Array<{ id: string; trace: ReturnType<typeof finalizeTrace>["trace"] }> = []
        for (const id of traceIds) {
          const fresh = incoming.get(id)!
          // fromRow leaves absent fields absent (never undefined), which is what StoredSpan means.
          const earlier = ((stored.get(id) ?? []) as ReadonlyArray<StoredSpan>).filter((s) => !fresh.has(s.id))
          const finalized = finalizeTrace([...earlier, ...[...fresh.values()].map((m) => m.span)])
          const changed = new Map(finalized.spanUpdates.map((u) => [u.id, u]))
          for (const m of fresh.values()) {
            const update = changed.get(m.span.id)
            if (update === undefined) finalOwn.push(m)
            else {
              const { id: _id, ...fields } = update
              finalOwn.push({ ...m, span: { ...m.span, ...fields } })
            }
          }
          for (const update of finalized.spanUpdates) {
            if (!fresh.has(update.id)) updates.push({ ...update, traceId: id })
          }
          traces.push({ id, trace: finalized.trace })
        }
        yield* store.insertNewSpans(accountId, finalOwn.filter((m) => created.has(m.traceId)))
        yield* store.upsertSpans(accountId, finalOwn.filter((m) => !created.has(m.traceId)))
        yield* store.applySpanUpdates(updates)
        yield* store.applyTraces(traces)
        // The live stream's events, in the same transaction: one row for the whole request.
        yield* stream.record(accountId, traces.map(({ id, trace }): StreamGroup => {
          const earlier = new Set((stored.get(id) ?? []).map((s) => s.id))
          const becameTerminal = trace.status !== locked.get(id)!.status && isTerminal(trace.status)
          return {
            t: id,
            ...(created.has(id) ? { b: "created" as const } : {}),
            s: [...incoming.get(id)!.values()].map((m) => [m.span.id, earlier.has(m.span.id) ? rewrittenSpanCode(m.span) : "c"] as const),
            a: becameTerminal ? "terminal" : "updated"
          }
        }))
        yield* jobs.enqueueMany(
          accountId,
          TERMINAL_TRACE_JOB,
          traces
            .filter(({ id, trace }) => trace.status !== locked.get(id)!.status && isTerminal(trace.status))
            .map(({ id, trace }) => ({ traceId: id, status: trace.status }))
        )
        // One search-indexing job per export, in the same transaction (embedding happens off the hot path).
        if (traceIds.length > 0) yield* jobs.enqueue(accountId, SEARCH_INDEX_JOB, { traceIds })
        return {
          tracesCreated: traceIds.filter((id) => created.has(id)).length,
          spansIngested: own.length,
          refused: spans.length - own.length
        }
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: Effect.die })
    )

    const ingest = Effect.fn("OtlpIngest.ingest")(function*(accountId: AccountId, decoded: DecodedExport) {
      const { reasons, rejected, spans } = mapAll(accountId, decoded)
      const written = spans.length === 0
        ? { tracesCreated: 0, spansIngested: 0, refused: 0 }
        : yield* write(accountId, spans)
      if (written.refused > 0) reasons.add("spans of a trace that was deleted, or that another account owns, were refused")
      const rejectedSpans = rejected + written.refused
      return {
        tracesCreated: written.tracesCreated,
        spansIngested: written.spansIngested,
        rejectedSpans,
        errorMessage: rejectedSpans > 0 ? [...reasons].join("; ") : undefined
      } satisfies IngestResult
    })

    return { ingest } as const
  }),
  dependencies: [OtlpStore.Default, JobQueue.Default, StreamEvents.Default]
}) {}
