import { BunContext } from "@effect/platform-bun"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { Embedder } from "#layers/search/Embedder"
import { SearchDependenciesLive } from "#layers/search/SearchLive"
import { SpanIndex } from "#layers/search/SpanIndex"
import { StorageLive } from "#layers/storage/Sql"

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
