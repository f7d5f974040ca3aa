import { Effect, Layer, Option, Redacted, Schedule } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { MigrationsLive } from "./Migrations.ts"
import * as PgliteClient from "./PgliteClient.ts"
import { pgPoolLayer } from "./PreparedStatements.ts"

// Instances starting together on an empty database race to create the migrator's own table (before its
// lock is taken); the loser fails once and succeeds on retry, when the winner's migrations are visible.
const MigratedLive = MigrationsLive.pipe(
  Layer.retry(Schedule.spaced("250 millis").pipe(Schedule.intersect(Schedule.recurs(4))))
)

/**
 * DATABASE_URL set: that PostgreSQL server. Unset: embedded PGlite in TAPEDECK_DATA_DIR. Migrated either way.
 * The migrator's type asks for the platform context (FileSystem, Path, CommandExecutor): main provides it.
 */
export const SqlLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* AppConfig
    return Option.match(config.databaseUrl, {
      onSome: (url) =>
        pgPoolLayer({
          url: Redacted.value(url),
          maxConnections: config.dbPoolMax,
          // An unreachable server fails requests with 503 after this, rather than leaving them waiting.
          connectTimeout: `${config.dbConnectTimeoutMs} millis`,
          applicationName: "tapedeck",
          prepareMarked: config.dbPreparedStatements
        }),
      onNone: () =>
        PgliteClient.layer({
          dataDir: config.dataDir,
          sharedBuffers: Option.getOrUndefined(config.pgliteSharedBuffers)
        })
    })
  })
).pipe((client) => Layer.provideMerge(MigratedLive, client))

/** Which storage backend a configuration selects, for logs and diagnostics. */
export const describeStorage = (config: AppConfig) =>
  Option.isSome(config.databaseUrl) ? "postgresql (DATABASE_URL)" : `embedded pglite (${config.dataDir})`

/** Storage as configured, migrated, together with the configuration it was chosen by. */
export const StorageLive = SqlLive.pipe(Layer.provideMerge(AppConfig.Default))
