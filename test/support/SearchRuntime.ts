import { BunContext } from "@effect/platform-bun"
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { Embedder } from "#layers/search/Embedder"
import { SearchDependenciesLive } from "#layers/search/SearchLive"
import { SpanIndex } from "#layers/search/SpanIndex"
import { StorageLive } from "#layers/storage/Sql"
import { uuid } from "./Fixtures.ts"

/** Migrated storage with the search layers, configured by `env` (a test database's env and settings). */
export const openSearchRuntime = async (env: Record<string, string>) => {
  const runtime = ManagedRuntime.make(
    SearchDependenciesLive.pipe(
      Layer.provideMerge(StorageLive),
      Layer.provide(BunContext.layer),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Error)),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
    )
  )
  await runtime.runPromise(runtime.runtimeEffect)
  return runtime
}
export type SearchRuntime = Awaited<ReturnType<typeof openSearchRuntime>>

type SearchInput = Parameters<SpanIndex["search"]>[0]

/**
 * `SpanIndex.search` of a query embedded by the runtime's embedder (no filters and from the first hit unless given):
 * the query's vector and the hits.
 */
export const embeddedSearch = (
  input: Omit<SearchInput, "embedder" | "vector" | "filters" | "offset"> &
    Partial<Pick<SearchInput, "filters" | "offset">>
) =>
  Effect.gen(function* () {
    const index = yield* SpanIndex
    const embedder = yield* Embedder
    const [vector] = yield* embedder.embed([input.query])
    const hits = yield* index.search({
      filters: undefined,
      offset: 0,
      ...input,
      embedder: embedder.id,
      vector: vector!
    })
    return { vector: vector!, hits }
  }).pipe(Effect.orDie)

/** A span as the search tests store it: the columns search reads. */
export interface SearchedSpan {
  readonly id: string
  readonly span_type: string
  readonly name: string
  readonly model?: string
  readonly input?: unknown
  readonly output?: unknown
  readonly error?: string
  readonly started_at: string
  readonly cost: number
  readonly duration_ms: number
}

/**
 * A new account (`name` its name) with the spans in one trace, indexed as the index job does: the index's pending
 * rows (each span's id and text).
 */
export const storeIndexed = (account: AccountId, name: string, spans: ReadonlyArray<SearchedSpan>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const index = yield* SpanIndex
    const embedder = yield* Embedder
    const trace = uuid()
    yield* sql`INSERT INTO accounts (id, name) VALUES (${account}, ${name})`
    yield* sql`INSERT INTO traces (id, account_id, status, started_at) VALUES (${trace}, ${account}, 'completed', now())`
    for (const span of spans) {
      yield* sql`
        INSERT INTO spans (trace_id, id, account_id, span_type, name, model, input, output, error, started_at, cost, duration_ms)
        VALUES (${trace}, ${span.id}, ${account}, ${span.span_type}, ${span.name}, ${span.model ?? null},
                ${span.input === undefined ? null : JSON.stringify(span.input)}::jsonb,
                ${span.output === undefined ? null : JSON.stringify(span.output)}::jsonb, ${span.error ?? null},
                ${span.started_at}, ${span.cost}, ${span.duration_ms})`
    }
    const { pending } = yield* index.pendingOfTraces(account, [trace], embedder.id)
    yield* index.store(embedder.id, pending, yield* embedder.embed(pending.map((p) => p.text)))
    return pending
  }).pipe(Effect.orDie)
