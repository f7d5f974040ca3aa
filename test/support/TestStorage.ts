import { BunContext } from "@effect/platform-bun"
import type { SqlClient } from "@effect/sql"
import { ConfigProvider, type Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import type { AppConfig } from "#layers/config/AppConfig"
import { StorageLive } from "#layers/storage/Sql"
import { createTestDatabase } from "./Database.ts"

export interface TestStorage {
  readonly run: <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient | AppConfig>) => Promise<A>
  readonly stop: () => Promise<void>
}

/** Migrated storage (PGlite in memory, or a fresh database on TEST_DATABASE_URL), shared by a test file. */
export const startTestStorage = async (env: Record<string, string> = {}): Promise<TestStorage> => {
  const database = await createTestDatabase()
  const config = ConfigProvider.fromMap(new Map(Object.entries({ ...database.env, ...env })))
  const runtime = ManagedRuntime.make(
    StorageLive.pipe(
      Layer.provide(BunContext.layer),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Error)),
      Layer.provide(Layer.setConfigProvider(config))
    )
  )
  await runtime.runPromise(runtime.runtimeEffect)
  return {
    run: (effect) => runtime.runPromise(effect),
    stop: async () => {
      await runtime.dispose()
      await database.drop()
    }
  }
}
