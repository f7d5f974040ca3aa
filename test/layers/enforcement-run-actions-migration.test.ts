import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import runActions from "#layers/storage/migrations/0038_enforcement_run_actions"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// Migration 0038 on a database written before it: each run's `recent` array becomes its rows, in order, numbered from
// 1, with the run's `actions` counter at their count; later writes continue the numbering.
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

const ACCOUNT = "00000000-0000-4000-8000-0000000000b7"

test("0038 moves every run's recent actions into rows, and the batch statement writes on from there", async () => {
  const recent = [
    { tool: "search", args: "a", step: 0, atMs: 1000 },
    { tool: "fetch", args: null, step: 1, atMs: 2000 },
    { tool: null, args: null, step: null, atMs: 3000 }
  ]
  const result = await storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      // The schema as 0029 left it.
      yield* sql`DROP TABLE enforcement_run_actions`
      yield* sql`DROP FUNCTION tapedeck_run_actions_add, tapedeck_run_recent`
      yield* sql`ALTER TABLE enforcement_runs DROP COLUMN actions, ADD COLUMN recent jsonb NOT NULL DEFAULT '[]'`
      yield* sql`
        INSERT INTO enforcement_runs (account_id, run_id, spent_usd, tokens, recent)
        VALUES (${ACCOUNT}, 'old-run', 1.5, 30, ${JSON.stringify(recent)}::jsonb),
               (${ACCOUNT}, 'empty-run', 0, 0, '[]'::jsonb)`
      yield* runActions
      const runs = yield* sql<{ run_id: string; actions: number; recent: unknown }>`
        SELECT run_id, actions::int AS actions, tapedeck_run_recent(account_id, run_id, 5000) AS recent
        FROM enforcement_runs WHERE account_id = ${ACCOUNT} ORDER BY run_id`
      const versions = yield* sql<{ version: string }>`
        SELECT xmin::text AS version FROM enforcement_runs WHERE account_id = ${ACCOUNT} AND run_id = 'old-run'`
      const id = crypto.randomUUID()
      const written = yield* sql.unsafe<{ written: boolean }>(
        "SELECT written FROM tapedeck_check_batch($1::text::jsonb, $2::text::jsonb, ARRAY[]::text[], 5000)",
        [
          JSON.stringify([
            {
              account_id: ACCOUNT,
              run_id: "old-run",
              version: versions[0]!.version,
              usd: ["0.5"],
              tokens: 5,
              append: [{ tool: "search", args: "b", step: 2, atMs: 4000, id }]
            }
          ]),
          "[]"
        ]
      )
      const after = yield* sql<{ seq: number; decision_id: string | null; tool: string | null }>`
        SELECT seq::int AS seq, decision_id, tool FROM enforcement_run_actions
        WHERE account_id = ${ACCOUNT} AND run_id = 'old-run' ORDER BY seq`
      const columns = yield* sql<{ name: string }>`
        SELECT column_name AS name FROM information_schema.columns WHERE table_name = 'enforcement_runs'`
      return { runs, written, after, id, columns: columns.map((c) => c.name) }
    })
  )
  const parsed = result.runs.map((r) => ({
    ...r,
    recent: typeof r.recent === "string" ? JSON.parse(r.recent) : r.recent
  }))
  expect(parsed).toEqual([
    { run_id: "empty-run", actions: 0, recent: [] },
    { run_id: "old-run", actions: 3, recent }
  ])
  expect(result.written).toEqual([{ written: true }])
  expect(result.after).toEqual([
    { seq: 1, decision_id: null, tool: "search" },
    { seq: 2, decision_id: null, tool: "fetch" },
    { seq: 3, decision_id: null, tool: null },
    { seq: 4, decision_id: result.id, tool: "search" }
  ])
  expect(result.columns).not.toContain("recent")
})
