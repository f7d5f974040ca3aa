import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, FastCheck as fc, Layer } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { SqlPolicyStoreLive } from "#layers/enforcement/SqlPolicyStore"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { Traces } from "#layers/traces/Traces"
import type { AccountId } from "#src/domain/Ids"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// A run's recent allowed actions are rows of their own (migration 0038): the run's row keeps only totals.
let storage: TestStorage
let account: AccountId
beforeAll(async () => {
  storage = await startTestStorage({ TAPEDECK_ENFORCEMENT_DB_CONNECTIONS: "0" })
  account = await storage.run(
    Effect.flatMap(AccountRepo, (r) => r.ensure("run-actions")).pipe(Effect.provide(AccountRepo.Default))
  )
})
afterAll(() => storage.stop())

const sql = (text: string, params: ReadonlyArray<unknown> = []) =>
  storage.run(Effect.flatMap(SqlClient.SqlClient, (s) => s.unsafe<any>(text, params)))

/** A store of its own per call: nothing cached, so the run's state is read back from the database each time. */
const check = (body: Record<string, unknown>) =>
  storage.run(
    Effect.flatMap(Enforcement, (e) => e.check(account, { run_id: "long-run", ...body } as never)).pipe(
      Effect.provide(
        Enforcement.DefaultWithoutDependencies.pipe(
          Layer.provide(SqlPolicyStoreLive),
          Layer.provide([AppConfig.Default, Traces.Default])
        )
      )
    )
  )

describe("a run's recent actions", () => {
  test("appending keeps exactly the last p_max_recent, oldest first, whatever the batch sizes", async () => {
    let n = 0
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.array(fc.string({ maxLength: 3 }), { maxLength: 4 }), { maxLength: 8 }),
        async (max, batches) => {
          const run = `prop-${n++}`
          const all: Array<{ tool: string; args: null; step: number; atMs: number }> = []
          for (const batch of batches) {
            const append = batch.map((tool, i) => ({
              tool,
              args: null,
              step: all.length + i,
              atMs: 1000 + all.length + i
            }))
            await sql("SELECT tapedeck_run_actions_add($1::uuid, $2::text, $3::bigint, $4::text::jsonb, $5::int)", [
              account,
              run,
              all.length,
              JSON.stringify(append),
              max
            ])
            all.push(...append)
          }
          const [row] = await sql(
            `SELECT tapedeck_run_recent($1::uuid, $2::text, $3::int) AS recent,
                    (SELECT count(*)::int FROM enforcement_run_actions WHERE account_id = $1::uuid AND run_id = $2::text) AS n`,
            [account, run, max]
          )
          const recent = typeof row.recent === "string" ? JSON.parse(row.recent) : row.recent
          expect(recent).toEqual(all.slice(-max))
          expect(row.n).toBe(Math.min(all.length, max))
        }
      ),
      { numRuns: 40 }
    )
  })

  test("the run's row does not grow with its actions, and the loop breaker still sees them all", async () => {
    await sql(
      `INSERT INTO guardrails (id, account_id, type, name, params)
       VALUES (gen_random_uuid(), $1::uuid, 'loop_breaker', 'twice at most', '{"max_repeats": 2}'::jsonb)`,
      [account]
    )
    const rowSize = async () =>
      (
        await sql(
          "SELECT pg_column_size(r.*)::int AS size FROM enforcement_runs r WHERE account_id = $1 AND run_id = 'long-run'",
          [account]
        )
      )[0].size
    expect((await check({ tool_name: "search", tool_args_hash: "first", step_index: 0 })).verdict).toBe("allow")
    const first = await rowSize()
    for (let i = 1; i < 40; i++) {
      expect((await check({ tool_name: "search", tool_args_hash: `args-${i}`, step_index: i })).verdict).toBe("allow")
    }
    expect(await rowSize()).toBe(first)
    // The first action again, twice: the loop breaker finds it among the 40 stored (read back, nothing cached).
    expect((await check({ tool_name: "search", tool_args_hash: "first", step_index: 40 })).verdict).toBe("allow")
    const third = await check({ tool_name: "search", tool_args_hash: "first", step_index: 41 })
    expect(third.verdict).toBe("block")
    expect(third.policy_type).toBe("loop_breaker")
    const [stored] = await sql(
      `SELECT r.actions::int AS actions,
              (SELECT count(*)::int FROM enforcement_run_actions a
               WHERE a.account_id = r.account_id AND a.run_id = r.run_id AND a.decision_id IS NOT NULL) AS named
       FROM enforcement_runs r WHERE account_id = $1 AND run_id = 'long-run'`,
      [account]
    )
    expect(stored).toEqual({ actions: 41, named: 41 })
  })
})
