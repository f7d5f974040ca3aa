import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { pgPoolLayer } from "../storage/PreparedStatements.ts"

/**
 * The connections enforcement checks use. On PostgreSQL, a pool of their own (TAPEDECK_ENFORCEMENT_DB_CONNECTIONS)
 * beside the shared one: exports, searches and jobs can take every shared connection and the checks still find theirs.
 * On embedded PGlite (one connection for everything), or with that setting 0, the shared client.
 */
export const EnforcementSqlLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const shared = Layer.effectContext(Effect.context<SqlClient.SqlClient>())
    if (config.enforcementDbConnections === 0) return shared
    return Option.match(config.databaseUrl, {
      onSome: (url) =>
        pgPoolLayer({
          url: Redacted.value(url),
          maxConnections: config.enforcementDbConnections,
          connectTimeout: `${config.dbConnectTimeoutMs} millis`,
          applicationName: "tapedeck-enforcement",
          prepareMarked: config.dbPreparedStatements
        }),
      onNone: () => shared
    })
  })
)
