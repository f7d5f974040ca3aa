import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Layer } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { EmbeddedMaintenanceLive, maintainTables } from "#layers/storage/EmbeddedMaintenance"
import * as PgliteClient from "#layers/storage/PgliteClient"
import { planRows } from "#layers/search/SpanIndex"

const inMemory = PgliteClient.layer({ dataDir: "memory://" })

interface Stats {
  readonly dead: number
  readonly analysed: boolean
  readonly vacuumed: boolean
  readonly estimate: number
}

/** The table's counters as the server sees them now, and the planner's estimate of `WHERE kind = 'rare'`. */
const statsOf = (table: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`SELECT pg_stat_force_next_flush()`
    const [row] = yield* sql<{ dead: number; analysed: boolean; vacuumed: boolean }>`
      SELECT n_dead_tup::int AS dead, last_analyze IS NOT NULL AS analysed, last_vacuum IS NOT NULL AS vacuumed
      FROM pg_stat_user_tables WHERE relname = ${table}`
    const plan = yield* sql<{ "QUERY PLAN": unknown }>`
      EXPLAIN (FORMAT JSON) SELECT 1 FROM ${sql(table)} WHERE kind = 'rare'`
    return { ...row!, estimate: planRows(plan[0]?.["QUERY PLAN"]) } satisfies Stats
  })

describe("embedded maintenance (autovacuum's job on PGlite)", () => {
  test("vacuums a table full of dead rows, analyses a changed one, and leaves the rest alone", async () => {
    await Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE churn (id int PRIMARY KEY, kind text NOT NULL)`
      yield* sql`CREATE TABLE growing (id int PRIMARY KEY, kind text NOT NULL)`
      yield* sql`CREATE TABLE quiet (id int PRIMARY KEY, kind text NOT NULL)`
      // First pass: three tables never analysed.
      expect(yield* maintainTables).toEqual(["churn", "growing", "quiet"])
      expect(yield* maintainTables).toEqual([])

      // 10,000 rows of which 50 are 'rare'; then 6,000 of them deleted (dead rows far past 50 + 20 %).
      yield* sql`INSERT INTO churn SELECT g, CASE WHEN g % 200 = 0 THEN 'rare' ELSE 'common' END FROM generate_series(1, 10000) g`
      expect(yield* maintainTables).toEqual(["churn"]) // the insert alone is a change to analyse
      yield* sql`DELETE FROM churn WHERE id > 4000`
      // Changes since the last ANALYZE, under the vacuum threshold of a big table: analysed only.
      yield* sql`INSERT INTO growing SELECT g, CASE WHEN g % 100 = 0 THEN 'rare' ELSE 'common' END FROM generate_series(1, 2000) g`
      const before = yield* statsOf("churn")
      expect(before.dead).toBe(6000)

      expect(yield* maintainTables).toEqual(["churn", "growing"])
      const churn = yield* statsOf("churn")
      expect(churn).toMatchObject({ dead: 0, analysed: true, vacuumed: true })
      // 20 'rare' rows are left: the planner now knows.
      expect(churn.estimate).toBeGreaterThanOrEqual(10)
      expect(churn.estimate).toBeLessThanOrEqual(40)
      const growing = yield* statsOf("growing")
      expect(growing).toMatchObject({ analysed: true, vacuumed: false })
      expect(growing.estimate).toBeGreaterThanOrEqual(10)
      expect(growing.estimate).toBeLessThanOrEqual(40)
      expect((yield* statsOf("quiet")).vacuumed).toBe(false)

      expect(yield* maintainTables).toEqual([])
    }).pipe(Effect.provide(inMemory), Effect.scoped, Effect.runPromise)
  }, 60_000)

  test("the layer runs a pass at start on the embedded database, and none with DATABASE_URL", async () => {
    const withConfig = (env: Record<string, string>) =>
      EmbeddedMaintenanceLive.pipe(
        Layer.provide(AppConfig.Default),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
      )
    const analysedAfterStart = (env: Record<string, string>) =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE fresh (id int PRIMARY KEY, kind text NOT NULL)`
        yield* sql`INSERT INTO fresh SELECT g, 'common' FROM generate_series(1, 500) g`
        return yield* Effect.gen(function* () {
          // The pass is forked at start: give it a moment.
          for (let i = 0; i < 50; i++) {
            if ((yield* statsOf("fresh")).analysed) return true
            yield* Effect.sleep("20 millis")
          }
          return false
        }).pipe(Effect.provide(withConfig(env)))
      }).pipe(Effect.provide(inMemory), Effect.scoped, Effect.runPromise)

    expect(await analysedAfterStart({})).toBe(true)
    expect(await analysedAfterStart({ DATABASE_URL: "postgres://127.0.0.1:1/never-used" })).toBe(false)
  }, 60_000)
})

describe("planRows (the planner's estimate the search path choice reads)", () => {
  test("reads Plan Rows from a parsed or textual EXPLAIN (FORMAT JSON); anything else is unknown (Infinity)", () => {
    expect(planRows([{ Plan: { "Node Type": "Seq Scan", "Plan Rows": 2575 } }])).toBe(2575)
    expect(planRows(JSON.stringify([{ Plan: { "Plan Rows": 12 } }]))).toBe(12)
    for (const bad of [
      undefined,
      null,
      "not json",
      [],
      [{}],
      [{ Plan: {} }],
      [{ Plan: { "Plan Rows": "7" } }],
      { Plan: { "Plan Rows": 3 } }
    ]) {
      expect(planRows(bad)).toBe(Number.POSITIVE_INFINITY)
    }
  })
})
