import { afterAll, beforeAll, expect, test } from "bun:test"
import { BunContext } from "@effect/platform-bun"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { MigrationsLive } from "#layers/storage/Migrations"
import { AccountRepo } from "#layers/storage/AccountRepo"
import traceListFilters from "#layers/storage/migrations/0019_trace_list_filters"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// Migration 0019 on a database written before it: stored traces get the models and error flag of their spans, and
// the listing's indexes exist (the trigram and btree_gin ones too: both backends ship the extensions).
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

const INDEXES = [
  "traces_cost",
  "traces_duration",
  "traces_errors",
  "traces_models",
  "traces_name",
  "traces_project",
  "traces_session",
  "traces_status"
]

test("0019 derives models and has_error of stored traces from their spans, and adds the listing's indexes", async () => {
  const { before, after, rows } = await storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const accountId = yield* (yield* AccountRepo).ensure("list-filters-migration")
      // The schema as 0018 left it.
      yield* sql.unsafe(`DROP INDEX ${INDEXES.join(", ")}`)
      yield* sql`ALTER TABLE traces DROP COLUMN models, DROP COLUMN has_error`
      yield* sql`CREATE INDEX traces_session ON traces (account_id, session_id) WHERE session_id IS NOT NULL`
      const indexes = sql<{ name: string; def: string }>`
      SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename = 'traces' AND indexname = ANY(${INDEXES}) ORDER BY 1`
      const before = yield* indexes
      const [plain, models, errored, failedSpanType] = [
        crypto.randomUUID(),
        crypto.randomUUID(),
        crypto.randomUUID(),
        crypto.randomUUID()
      ]
      for (const id of [plain, models, errored, failedSpanType]) {
        yield* sql`INSERT INTO traces (id, account_id, status, started_at) VALUES (${id}::uuid, ${accountId}::uuid, 'completed', now())`
      }
      const span = (traceId: string, type: string, model: string | null, error: string | null) =>
        sql`INSERT INTO spans (trace_id, account_id, id, span_type, name, model, error, started_at)
          VALUES (${traceId}::uuid, ${accountId}::uuid, gen_random_uuid(), ${type}, 's', ${model}, ${error}, now())`
      yield* span(plain, "action", null, null)
      yield* span(models, "llm_call", "gpt-4o", null)
      yield* span(models, "llm_call", "claude-3", null)
      yield* span(models, "llm_call", "gpt-4o", null)
      yield* span(errored, "tool_call", null, "timeout")
      yield* span(failedSpanType, "error", "gpt-4o", null)
      yield* traceListFilters
      const rows = yield* sql<{ id: string; models: ReadonlyArray<string>; has_error: boolean }>`
      SELECT id, models, has_error FROM traces WHERE account_id = ${accountId}::uuid`
      const byId = new Map(rows.map((r) => [r.id, { models: r.models, hasError: r.has_error }]))
      return {
        before,
        after: yield* indexes,
        rows: [plain, models, errored, failedSpanType].map((id) => byId.get(id))
      }
    }).pipe(Effect.provide(AccountRepo.Default))
  )
  expect(before.map((r) => r.name)).toEqual(["traces_session"])
  expect(after.map((r) => r.name)).toEqual(INDEXES)
  expect(after.find((r) => r.name === "traces_session")?.def).toContain("started_at DESC")
  expect(rows).toEqual([
    { models: [], hasError: false },
    { models: ["claude-3", "gpt-4o"], hasError: false },
    { models: [], hasError: true },
    { models: ["gpt-4o"], hasError: true }
  ])
  // With the extensions: the account id in the GIN indexes, names by trigram.
  expect(after.find((r) => r.name === "traces_models")?.def).toContain("USING gin (account_id, models)")
  expect(after.find((r) => r.name === "traces_name")?.def).toContain("USING gin (account_id, name gin_trgm_ops)")
})

test("on a database where a later migration already ran (main's 0020), starting again runs 0019 once and records it", async () => {
  const run = await storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      // A database written by the version before this one: 0020 recorded, 0019 neither recorded nor applied.
      yield* sql.unsafe(`DROP INDEX ${INDEXES.join(", ")}`)
      yield* sql`ALTER TABLE traces DROP COLUMN models, DROP COLUMN has_error`
      yield* sql`CREATE INDEX traces_session ON traces (account_id, session_id) WHERE session_id IS NOT NULL`
      yield* sql`DELETE FROM effect_sql_migrations WHERE migration_id = 19`
      const latest = yield* sql<{ id: number }>`SELECT max(migration_id) AS id FROM effect_sql_migrations`
      // What every start does: the migrator, then the migrations it skipped.
      yield* Effect.scoped(Layer.build(MigrationsLive)).pipe(Effect.provide(BunContext.layer))
      yield* Effect.scoped(Layer.build(MigrationsLive)).pipe(Effect.provide(BunContext.layer))
      const recorded = yield* sql<{ id: number; name: string }>`
      SELECT migration_id AS id, name FROM effect_sql_migrations WHERE migration_id = 19`
      const columns = yield* sql<{ name: string }>`
      SELECT attname AS name FROM pg_attribute WHERE attrelid = 'traces'::regclass AND attname IN ('models', 'has_error') ORDER BY 1`
      return { latest: Number(latest[0]!.id), recorded, columns: columns.map((c) => c.name) }
    })
  )
  expect(run.latest).toBeGreaterThan(19)
  expect(run.recorded).toEqual([{ id: 19, name: "trace_list_filters" }])
  expect(run.columns).toEqual(["has_error", "models"])
})
