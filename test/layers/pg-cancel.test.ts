import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Exit, FastCheck as fc, Fiber } from "effect"
import { CancelSafePool, TrackingClient } from "#layers/storage/PgCancel"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// An interrupted statement is cancelled on PostgreSQL (pg_cancel_backend on its backend). A cancel names a backend, not
// a statement: it must never land on the statement another fiber runs next on the same pooled connection. A small pool
// makes the connections change hands constantly, and the interruptions land before, during and after their statement.
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage({ TAPEDECK_DB_POOL_MAX: "2" })
})
afterAll(() => storage.stop())

/** A statement that runs a few milliseconds, answering a value of its own. */
const work = (n: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ n: number }>`SELECT ${n}::int + count(*)::int * 0 AS n FROM generate_series(1, 30000)`.pipe(
      Effect.map((rows) => rows[0]!.n)
    )
  )

describe("interrupted statements", () => {
  test("interrupting statements in flight never fails another fiber's statement on the same pool", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 12 }), { minLength: 8, maxLength: 24 }), async (delays) => {
        const outcome = await storage.run(
          Effect.gen(function* () {
            // Healthy statements, back to back on every connection the victims leave, for as long as they run.
            const healthy = yield* Effect.forEach(
              Array.from({ length: 4 * delays.length }, (_, i) => i),
              (i) => Effect.exit(work(i)),
              { concurrency: 3 }
            ).pipe(Effect.fork)
            // Victims, each interrupted after its delay: before it has a connection, while it runs, or after.
            const victims = yield* Effect.forEach(
              delays,
              (ms, i) => Effect.exit(work(1000 + i).pipe(Effect.timeout(Duration.millis(ms)))),
              { concurrency: "unbounded" }
            )
            return { healthy: yield* Fiber.join(healthy), victims }
          })
        )
        outcome.healthy.forEach((exit, i) => {
          if (Exit.isFailure(exit)) {
            const cause = (Cause.squash(exit.cause) as { cause?: { code?: string; message?: string } }).cause
            throw new Error(`healthy statement ${i} failed: ${cause?.code} ${cause?.message}`)
          }
          expect(exit.value).toBe(i)
        })
        // A victim either answers its own value or times out; it never fails with the database's error.
        outcome.victims.forEach((exit, i) => {
          if (Exit.isSuccess(exit)) expect(exit.value).toBe(1000 + i)
          else expect(String(exit.cause)).toContain("TimeoutException")
        })
      }),
      // PGlite runs one statement at a time and cancels nothing: a few runs show interruptions leave it serving.
      { numRuns: process.env.TEST_DATABASE_URL ? 25 : 5 }
    )
  })
})

describe.if(Boolean(process.env.TEST_DATABASE_URL))("interrupted statements on PostgreSQL", () => {
  test("an interrupted long statement is still cancelled on the server, and its connection serves again", async () => {
    const marker = `cancel-me-${crypto.randomUUID()}`
    const running = (sql: SqlClient.SqlClient) =>
      sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE state = 'active' AND query LIKE ${`%${marker}%`} AND pid <> pg_backend_pid()`.pipe(
        Effect.map((rows) => rows[0]!.n)
      )
    const result = await storage.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const long = yield* sql`SELECT pg_sleep(120), ${sql.literal(`'${marker}'`)}`.pipe(Effect.fork)
        // Wait until the statement runs on the server, then interrupt it.
        while ((yield* running(sql)) === 0) yield* Effect.sleep("20 millis")
        yield* Fiber.interrupt(long)
        // The cancel stops it on the server: polled for a few seconds (a statement left running would take 120 s).
        let left = yield* running(sql)
        for (let i = 0; i < 100 && left > 0; i++) {
          yield* Effect.sleep("50 millis")
          left = yield* running(sql)
        }
        // Both connections of the pool answer again.
        const after = yield* Effect.all([work(1), work(2)], { concurrency: 2 })
        return { left, after }
      })
    )
    expect(result.left).toBe(0)
    expect(result.after).toEqual([1, 2])
  })
  test("a statement interrupted inside a transaction runs to its end, the transaction is rolled back, others answer", async () => {
    const result = await storage.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE IF NOT EXISTS cancel_tx (n int)`
        const interrupted = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql`INSERT INTO cancel_tx VALUES (1)`
              yield* sql`SELECT pg_sleep(0.3)`
            })
          )
          .pipe(Effect.timeout("100 millis"), Effect.exit, Effect.fork)
        const others = yield* Effect.forEach(
          Array.from({ length: 30 }, (_, i) => i),
          (i) => work(i),
          { concurrency: 2 }
        )
        const exit = yield* Fiber.join(interrupted)
        const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM cancel_tx`
        return { timedOut: Exit.isFailure(exit) && String(exit.cause).includes("TimeoutException"), others, rows }
      })
    )
    expect(result.timedOut).toBe(true)
    expect(result.others).toEqual(Array.from({ length: 30 }, (_, i) => i))
    expect(result.rows[0]!.n).toBe(0)
  })
})

describe("a checked-out client's late error", () => {
  test.skipIf(!process.env.TEST_DATABASE_URL)(
    "a connection that dies while its client is out of the pool, its user no longer listening, ends nothing",
    async () => {
      const pool = new CancelSafePool({
        connectionString: process.env.TEST_DATABASE_URL,
        max: 1,
        Client: TrackingClient
      })
      const client = await pool.connect()
      // The pool stops listening on checkout, and its user (@effect/sql-pg) stops at the first error it hears: pg
      // emits the connection's end as an error then, which would end the process with no listener left.
      const connection = (
        client as unknown as {
          connection: { once: (e: string, f: () => void) => void; stream: { destroy: () => void } }
        }
      ).connection
      const ended = new Promise<void>((resolve) => connection.once("end", resolve))
      connection.stream.destroy()
      await ended
      await Bun.sleep(20)
      client.release(true)
      await pool.end()
    }
  )
})
