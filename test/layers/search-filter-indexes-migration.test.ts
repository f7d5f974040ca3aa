import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import partialFilterIndexes from "#layers/storage/migrations/0048_search_filter_indexes_partial"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// Migration 0048: the search filters' indexes on cost and model hold only the rows that have one, and a filter on
// either can still use them (a `>=` or `=` never matches NULL, which the planner proves).
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

const FILTER_INDEXES = ["span_embeddings_cost", "span_embeddings_model"]

/** The index a filter's scan of span_embeddings uses when a sequential scan is ruled out. */
const planIndex = (sql: SqlClient.SqlClient, filter: string) =>
  sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SET LOCAL enable_seqscan = off`
      const plan = yield* sql.unsafe<Record<string, string>>(
        `EXPLAIN SELECT count(*) FROM span_embeddings e
         WHERE e.account_id = '00000000-0000-4000-8000-000000000001'::uuid AND ${filter}`
      )
      const text = plan.map((row) => Object.values(row)[0]).join("\n")
      return FILTER_INDEXES.find((name) => text.includes(name)) ?? text
    })
  )

test("0048 makes the cost and model filter indexes partial, and filters still use them", async () => {
  const result = await storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const definitions = sql<{ name: string; def: string }>`
        SELECT indexname AS name, indexdef AS def FROM pg_indexes
        WHERE tablename = 'span_embeddings' AND indexname = ANY(${FILTER_INDEXES}) ORDER BY 1`
      const migrated = yield* definitions
      // The indexes as 0013 made them, then the migration again: what a database written before it goes through.
      yield* sql`DROP INDEX span_embeddings_cost, span_embeddings_model`
      yield* sql`CREATE INDEX span_embeddings_cost ON span_embeddings (account_id, cost)`
      yield* sql`CREATE INDEX span_embeddings_model ON span_embeddings (account_id, model)`
      const before = yield* definitions
      yield* partialFilterIndexes
      return {
        migrated,
        before,
        after: yield* definitions,
        cost: yield* planIndex(sql, "e.cost >= 0.25"),
        model: yield* planIndex(sql, "e.model = 'gpt-4o'")
      }
    })
  )
  const partial = {
    span_embeddings_cost: "WHERE (cost IS NOT NULL)",
    span_embeddings_model: "WHERE (model IS NOT NULL)"
  }
  for (const defs of [result.migrated, result.after]) {
    expect(defs.map((d) => d.name)).toEqual(FILTER_INDEXES)
    for (const d of defs) expect(d.def).toContain(partial[d.name as keyof typeof partial])
  }
  for (const d of result.before) expect(d.def).not.toContain("WHERE")
  expect(result.cost).toBe("span_embeddings_cost")
  expect(result.model).toBe("span_embeddings_model")
})
