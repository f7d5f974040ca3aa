import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { prepared } from "#layers/storage/PreparedStatements"
import { TraceRepo } from "#layers/traces/TraceRepo"
import type { AccountId } from "#src/domain/Ids"
import { CreateTraceRequest } from "#src/domain/Trace"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// pg_prepared_statements lists the statements of the session asking: one connection makes every call that session.
const ONE_CONNECTION = { TAPEDECK_DB_POOL_MAX: "1" }

const insertTraces = (count: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* TraceRepo
    const account = crypto.randomUUID() as AccountId
    yield* sql`INSERT INTO accounts (id, name) VALUES (${account}, ${account})`
    const ids: Array<string> = []
    for (let i = 0; i < count; i++) {
      const request = Schema.decodeUnknownSync(CreateTraceRequest)({
        id: crypto.randomUUID(),
        started_at: "2026-01-02T03:04:05.000Z",
        status: i % 2 === 0 ? "completed" : "running",
        spans: [
          {
            id: crypto.randomUUID(),
            parent_id: null,
            span_type: "action",
            name: `step ${i}`,
            started_at: "2026-01-02T03:04:05.000Z"
          }
        ]
      })
      ids.push((yield* repo.insert(account, request, i % 2 === 0 ? crypto.randomUUID() : null, 5)).id)
    }
    const stored = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM spans WHERE account_id = ${account}`
    const statements = yield* sql<{ statement: string; generic_plans: string }>`
      SELECT statement, generic_plans FROM pg_prepared_statements WHERE statement LIKE '/* prepared: %'`
    return { ids, spans: stored[0]!.n, statements }
  }).pipe(Effect.provide(TraceRepo.Default))

describe.if(Boolean(process.env.TEST_DATABASE_URL))("prepared statements on PostgreSQL", () => {
  let on: TestStorage
  let off: TestStorage
  beforeAll(async () => {
    on = await startTestStorage(ONE_CONNECTION)
    off = await startTestStorage({ ...ONE_CONNECTION, TAPEDECK_DB_PREPARED_STATEMENTS: "false" })
  })
  afterAll(async () => {
    await on.stop()
    await off.stop()
  })

  test("a marked statement is prepared once per connection and reused (a generic plan after the first five runs)", async () => {
    const result = await on.run(insertTraces(12))
    expect(result.spans).toBe(12)
    expect(new Set(result.ids).size).toBe(12)
    expect(result.statements.length).toBe(1)
    expect(result.statements[0]!.statement.startsWith(prepared("trace.insert"))).toBe(true)
    expect(Number(result.statements[0]!.generic_plans)).toBeGreaterThan(0)
  })

  test("TAPEDECK_DB_PREPARED_STATEMENTS=false runs it unnamed, with the same result", async () => {
    const result = await off.run(insertTraces(12))
    expect(result.spans).toBe(12)
    expect(result.statements).toEqual([])
  })
})
