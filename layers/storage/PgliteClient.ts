import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import { btree_gin } from "@electric-sql/pglite/contrib/btree_gin"
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm"
import { Reactivity } from "@effect/experimental"
import { SqlClient, SqlConnection, SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Stream } from "effect"
import { holdDataDirLock } from "./DataDirLock.ts"

/**
 * The buffer cache of an embedded database on disk (TAPEDECK_PGLITE_SHARED_BUFFERS). PGlite's own 128MB does not hold
 * a 100k-span account's vectors and HNSW index, and a page missed costs a file read through the WASM file system,
 * which slows filtered searches (the measurements and the memory it costs: docs/performance.md, "Search"). An
 * in-memory database (tests) keeps PGlite's default unless the variable is set.
 */
export const DEFAULT_SHARED_BUFFERS = "256MB"

/**
 * An `SqlClient` over embedded PGlite (PostgreSQL in WASM, with pgvector). PGlite has one backend, so
 * one connection is shared and serialised by a one-permit semaphore; statements of a transaction reuse
 * the transaction's connection, and other fibers wait for it to finish.
 */
export const make = (options: { readonly dataDir: string; readonly sharedBuffers?: string | undefined }) =>
  Effect.gen(function*() {
    if (!isInMemory(options.dataDir)) yield* holdDataDirLock(options.dataDir)
    const sharedBuffers = options.sharedBuffers ?? (isInMemory(options.dataDir) ? undefined : DEFAULT_SHARED_BUFFERS)
    const db = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          PGlite.create({
            dataDir: options.dataDir,
            // btree_gin and pg_trgm: the trace listing's indexes on models and names (migration 0019).
            extensions: { vector, btree_gin, pg_trgm },
            ...(sharedBuffers === undefined
              ? {}
              : { startParams: [...PGlite.defaultStartParams, "-c", `shared_buffers=${sharedBuffers}`] })
          }),
        catch: (cause) => new SqlError.SqlError({ cause, message: "could not open the embedded database" })
      }),
      (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
    )

    const run = (sql: string, params: ReadonlyArray<unknown>, rowMode: "object" | "array") =>
      Effect.tryPromise({
        try: () => db.query<any>(sql, params as Array<unknown>, { rowMode }),
        catch: (cause) => new SqlError.SqlError({ cause, message: (cause as Error)?.message ?? "query failed" })
      }).pipe(Effect.map((result) => result.rows))

    const connection: SqlConnection.Connection = {
      execute: (sql, params, transformRows) =>
        run(sql, params, "object").pipe(Effect.map((rows) => (transformRows ? transformRows(rows) : rows))),
      executeRaw: (sql, params) => run(sql, params, "object"),
      executeValues: (sql, params) => run(sql, params, "array"),
      executeUnprepared: (sql, params, transformRows) =>
        (params.length === 0
          ? Effect.tryPromise({
            try: () => db.exec(sql),
            catch: (cause) => new SqlError.SqlError({ cause, message: (cause as Error)?.message ?? "query failed" })
          }).pipe(Effect.map((results) => results.at(-1)?.rows ?? []))
          : run(sql, params, "object")).pipe(Effect.map((rows) => (transformRows ? transformRows(rows) : rows))),
      executeStream: (sql, params, transformRows) =>
        Stream.fromIterableEffect(
          run(sql, params, "object").pipe(Effect.map((rows) => (transformRows ? transformRows(rows) : rows)))
        )
    }

    const lock = yield* Effect.makeSemaphore(1)
    const acquirer = Effect.as(Effect.acquireRelease(lock.take(1), () => lock.release(1)), connection)

    return yield* SqlClient.make({
      acquirer,
      compiler: PgClient.makeCompiler(),
      spanAttributes: [["db.system", "postgresql"], ["db.name", "pglite"]]
    })
  })

/** `memory://` keeps the database in memory (tests); any other value is a directory. */
export const isInMemory = (dataDir: string) => dataDir.startsWith("memory://")

export const layer = (options: { readonly dataDir: string; readonly sharedBuffers?: string | undefined }) =>
  Layer.scoped(SqlClient.SqlClient, make(options)).pipe(Layer.provide(Reactivity.layer))
