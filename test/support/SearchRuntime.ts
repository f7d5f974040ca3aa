import { BunContext } from "@effect/platform-bun"
import { ConfigProvider, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { SearchDependenciesLive } from "#layers/search/SearchLive"
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
