import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Option, Schedule } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

/** How often the embedded database's tables are checked (PostgreSQL's autovacuum_naptime). */
export const MAINTENANCE_INTERVAL = Duration.minutes(1)

interface TableState {
  readonly name: string
  readonly vacuum: boolean
  readonly analyze: boolean
}

/**
 * One pass of what autovacuum would do, with its default thresholds: VACUUM (ANALYZE) a table whose dead rows
 * passed 50 + 20 % of its rows, ANALYZE one whose changes since its last ANALYZE passed 50 + 10 %, and ANALYZE a
 * table never analysed (after a restart the change counters start at zero, but `reltuples` persists). The tables
 * done, in order.
 */
export const maintainTables = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Single-user PostgreSQL flushes its statistics counters lazily: without this the counts below may be stale.
  yield* sql`SELECT pg_stat_force_next_flush()`
  const tables = yield* sql<TableState>`
    SELECT c.relname AS name,
      s.n_dead_tup > 50 + 0.2 * GREATEST(c.reltuples, 0) AS vacuum,
      (s.n_mod_since_analyze > 50 + 0.1 * GREATEST(c.reltuples, 0) OR c.reltuples < 0) AS analyze
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE s.schemaname = 'public'
    ORDER BY c.relname`
  const done: Array<string> = []
  for (const table of tables) {
    if (!table.vacuum && !table.analyze) continue
    const name = `"${table.name.replaceAll("\"", "\"\"")}"`
    yield* sql.unsafe(table.vacuum ? `VACUUM (ANALYZE) ${name}` : `ANALYZE ${name}`)
    done.push(table.name)
  }
  return done
})

/**
 * Embedded PGlite runs PostgreSQL in single-user mode, where autovacuum never runs: without this its tables
 * keep every dead row (the job queue and the stream log churn all day) and the planner never gets statistics
 * (a filtered search on a large account joined rows in the wrong order, several times slower). With DATABASE_URL the
 * server's own autovacuum does this; nothing runs here.
 */
export const EmbeddedMaintenanceLive = Layer.scopedDiscard(Effect.gen(function*() {
  const config = yield* AppConfig
  if (Option.isSome(config.databaseUrl)) return
  yield* maintainTables.pipe(
    Effect.tap((done) => done.length > 0 ? Effect.logDebug(`embedded maintenance: ${done.join(", ")}`) : Effect.void),
    Effect.catchAllCause((cause) => Effect.logWarning("embedded maintenance failed", cause)),
    Effect.repeat(Schedule.spaced(MAINTENANCE_INTERVAL)),
    Effect.forkScoped
  )
}))
