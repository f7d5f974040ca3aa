import { createHash } from "node:crypto"
import { SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect } from "effect"
import { CancelSafePool, TrackingClient } from "./PgCancel.ts"

/**
 * The comment that marks a statement to run as a named prepared statement on PostgreSQL: parsed and planned once per
 * connection instead of at every call. For hot statements whose text is fixed (or has a few variants) and whose
 * parameters do not change the best plan. Harmless elsewhere (PGlite runs the text as it is).
 */
export const prepared = (name: string) => `/* prepared: ${name} */`

const MARK = "/* prepared: "

/** Names by statement text: the marked statements are a few fixed texts, hashed once each, not at every call. */
const names = new Map<string, string>()
const NAMES_MAX = 256

/** The statement's name on a connection: derived from its whole text, so that two variants never share one. */
const statementName = (text: string) => {
  let name = names.get(text)
  if (name === undefined) {
    if (names.size >= NAMES_MAX) names.clear() // a marked statement whose text varies: bounded all the same
    name = `tapedeck_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`
    names.set(text, name)
  }
  return name
}

/**
 * node-postgres's client, running the statements marked by `prepared` as named ones (the form @effect/sql-pg uses:
 * text, parameters, callback); node-postgres prepares each once per connection and reuses it after.
 */
class PreparingClient extends TrackingClient {
  override query(...args: Array<unknown>): any {
    const [text, values, callback] = args
    if (typeof text === "string" && text.startsWith(MARK) && Array.isArray(values) && typeof callback === "function") {
      return (super.query as (...a: Array<unknown>) => unknown)({ name: statementName(text), text, values }, callback)
    }
    return (super.query as (...a: Array<unknown>) => unknown)(...args)
  }
}

export interface PgPoolOptions {
  readonly url: string
  readonly maxConnections: number
  readonly connectTimeout: Duration.DurationInput
  readonly applicationName: string
  /** Run the statements marked by `prepared` as named ones (off: every statement unnamed). */
  readonly prepareMarked: boolean
}

/**
 * `PgClient.layer` as @effect/sql-pg builds it (the pool, a first `SELECT 1` within the connect timeout, the pool
 * ended with the scope), over our own pool: of PreparingClients, or plain clients when `prepareMarked` is off; the pool
 * is a CancelSafePool, so that an interrupted statement's cancel never reaches another statement.
 */
export const pgPoolLayer = (options: PgPoolOptions) =>
  PgClient.layerFromPool({
    applicationName: options.applicationName,
    acquire: Effect.acquireRelease(
      Effect.gen(function* () {
        const pool = new CancelSafePool({
          connectionString: options.url,
          connectionTimeoutMillis: Duration.toMillis(options.connectTimeout),
          max: options.maxConnections,
          application_name: options.applicationName,
          Client: options.prepareMarked ? PreparingClient : TrackingClient
        })
        pool.on("error", () => {}) // an idle client's error: the next query on it reconnects
        yield* Effect.tryPromise({
          try: () => pool.query("SELECT 1"),
          catch: (cause) => new SqlError.SqlError({ cause, message: "PgClient: Failed to connect" })
        }).pipe(
          Effect.timeoutFail({
            duration: options.connectTimeout,
            onTimeout: () =>
              new SqlError.SqlError({
                cause: new Error("Connection timed out"),
                message: "PgClient: Connection timed out"
              })
          }),
          Effect.tapError(() => Effect.promise(() => pool.end()))
        )
        return pool
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
    )
  })
