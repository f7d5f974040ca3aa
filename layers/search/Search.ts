import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import type { AccountId } from "#src/domain/Ids"
import type { Diagnostics, SearchRequest } from "#src/domain/Search"
import { type JobKind, SEARCH_JOB_KINDS } from "#src/domain/Jobs"
import { AppConfig } from "../config/AppConfig.ts"
import { attemptTimeoutMs, type JobHandler } from "../jobs/JobHandlers.ts"
import { yieldToForeground } from "../jobs/Foreground.ts"
import { Embedder } from "./Embedder.ts"
import { type PendingSpan, SpanIndex } from "./SpanIndex.ts"
import { uuidArray } from "../storage/SqlArrays.ts"
import { JobFailed } from "#src/domain/Errors"

const REEMBED_KIND = "search.reembed" satisfies JobKind

/**
 * A re-embed job runs this long before it hands the rest over to a new job: a minute, or a quarter of its attempt's
 * time when the lease is short (under steady writes there is always more to embed, and an attempt cut off by its
 * timeout counts as failed: five of them dead-letter the job).
 */
const reembedSliceMs = (leaseSeconds: number) => Math.min(60_000, attemptTimeoutMs(leaseSeconds) / 4)
const REEMBED_BATCH = 256

/** Under a load that never pauses, indexing still takes one batch per this many milliseconds. */
const MAX_YIELD_MS = 1000

/**
 * One indexing batch at a time in this process, whichever job it belongs to: the job worker runs many jobs at once,
 * and each waiting for a gap on its own would together take the event loop.
 */
const indexingTurn = Effect.unsafeMakeSemaphore(1)

/**
 * Embeds and stores pending spans in the embedder's batch size; each batch commits on its own. Each batch waits for
 * its turn, then for the requests in flight here to finish (up to MAX_YIELD_MS): embedding is CPU on the event
 * loop, and ingestion comes first.
 */
const embedAndStore = (pending: ReadonlyArray<PendingSpan>) =>
  Effect.gen(function*() {
    const embedder = yield* Embedder
    const index = yield* SpanIndex
    for (let i = 0; i < pending.length; i += embedder.maxBatch) {
      const batch = pending.slice(i, i + embedder.maxBatch)
      yield* Effect.gen(function*() {
        yield* yieldToForeground(MAX_YIELD_MS)
        const vectors = yield* embedder.embed(batch.map((p) => p.text))
        yield* index.store(embedder.id, batch, vectors)
      }).pipe(indexingTurn.withPermits(1))
    }
  })

export const searchIndexHandler = Effect.gen(function*() {
  const embedder = yield* Embedder
  const index = yield* SpanIndex
  const handler: JobHandler<"search.index"> = (job) =>
    Effect.gen(function*() {
      const traceIds = "traceIds" in job.payload ? job.payload.traceIds : [job.payload.traceId]
      const { filtersStale, pending } = yield* index.pendingOfTraces(job.accountId, traceIds, embedder.id)
      yield* embedAndStore(pending)
      // Spans whose text did not change keep their vector; their filterable fields may have.
      yield* index.syncFilters(job.accountId, filtersStale)
    }).pipe(
      Effect.provideService(Embedder, embedder),
      Effect.provideService(SpanIndex, index),
      Effect.catchTag("EmbedderUnavailable", (e) => new JobFailed({ reason: `embedder: ${e.reason}` }))
    )
  return handler
})

export const searchReembedHandler = Effect.gen(function*() {
  const embedder = yield* Embedder
  const index = yield* SpanIndex
  const sql = yield* SqlClient.SqlClient
  const config = yield* AppConfig
  const handler: JobHandler<"search.reembed"> = (job) =>
    Effect.gen(function*() {
      const started = Date.now()
      const sliceMs = reembedSliceMs(config.jobLeaseSeconds)
      for (;;) {
        const pending = yield* index.pendingOfAccount(job.accountId, embedder.id, REEMBED_BATCH)
        if (pending.length === 0) return
        yield* embedAndStore(pending)
        if (Date.now() - started > sliceMs) {
          // Progress is committed batch by batch; the rest continues in a fresh job (a fresh lease).
          yield* sql`
            INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts)
            VALUES (gen_random_uuid(), ${job.accountId}, ${REEMBED_KIND}, '{}'::jsonb, 'queued', ${config.jobMaxAttempts})`
            .pipe(Effect.orDie)
          return
        }
      }
    }).pipe(
      Effect.provideService(Embedder, embedder),
      Effect.provideService(SpanIndex, index),
      Effect.catchTag("EmbedderUnavailable", (e) => new JobFailed({ reason: `embedder: ${e.reason}` }))
    )
  return handler
})

/**
 * At start: logs the embedder and the index mode, and queues a re-embed job for every account that has spans
 * without a vector from the current embedder (a new embedder, or spans written before search existed), unless
 * one is already queued or running.
 */
export const SearchStartupLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const embedder = yield* Embedder
    const index = yield* SpanIndex
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const mode = yield* index.mode
    yield* Effect.logInfo(`search: embedder ${embedder.id}, index ${mode}`)
    if (embedder.dims !== null) yield* index.ensureIndex(embedder.id, embedder.dims)
    const accounts = yield* index.accountsWithStale(embedder.id)
    if (accounts.length === 0) return
    yield* sql`
      INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts)
      SELECT gen_random_uuid(), a.id, ${REEMBED_KIND}, '{}'::jsonb, 'queued', ${config.jobMaxAttempts}::int
      FROM unnest(${uuidArray(accounts)}::uuid[]) AS a(id)
      WHERE NOT EXISTS (
        SELECT 1 FROM jobs j
        WHERE j.account_id = a.id AND j.kind = ${REEMBED_KIND} AND j.status IN ('queued', 'running'))`
      .pipe(Effect.orDie)
    yield* Effect.logInfo(`search: re-embedding queued for ${accounts.length} account(s)`)
  })
)

/** POST /api/v1/search and the search part of GET /api/v1/diagnostics. */
export class Search extends Effect.Service<Search>()("tapedeck/search/Search", {
  effect: Effect.gen(function*() {
    const embedder = yield* Embedder
    const index = yield* SpanIndex

    const search = Effect.fn("Search.search")(function*(accountId: AccountId, request: SearchRequest) {
      const [vector] = yield* embedder.embed([request.query])
      const hits = yield* index.search({
        accountId,
        embedder: embedder.id,
        query: request.query,
        vector: vector!,
        filters: request.filters,
        limit: request.limit,
        offset: request.offset
      })
      return { spans: hits.map((h) => h.span) }
    })

    const diagnostics = Effect.fn("Search.diagnostics")(function*(accountId: AccountId) {
      const mode = yield* index.mode
      const stats = yield* index.stats(accountId, embedder.id, SEARCH_JOB_KINDS)
      return {
        search: {
          embedder: embedder.id,
          embedder_kind: embedder.kind,
          dimensions: embedder.dims,
          index_mode: mode,
          pending_jobs: stats.pending,
          indexed_spans: stats.indexed,
          stale_spans: stats.stale
        }
      } satisfies Diagnostics
    })

    return { search, diagnostics } as const
  })
}) {}
