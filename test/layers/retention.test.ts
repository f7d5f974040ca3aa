import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { purgeDeletedTraces } from "#layers/traces/Retention"
import { TraceRepo } from "#layers/traces/TraceRepo"
import { Traces } from "#layers/traces/Traces"
import type { TraceId } from "#src/domain/Ids"
import { CreateTraceRequest } from "#src/domain/Trace"
import { Schema } from "effect"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"
import { span, trace } from "../support/Fixtures.ts"

let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage({ TAPEDECK_RETENTION_DAYS_DELETED: "30" })
})
afterAll(() => storage.stop())

const counts = (ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const traces = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM traces WHERE id IN ${sql.in(ids)}`
    const spans = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM spans WHERE trace_id IN ${sql.in(ids)}`
    return [traces[0]!.n, spans[0]!.n]
  })

test("removes traces soft-deleted longer ago than the retention period, with their spans; idempotent and concurrent-safe", async () => {
  const result = await storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const traces = yield* Traces
      const accountId = yield* (yield* AccountRepo).ensure("retention")
      const make = () => Schema.decodeUnknownSync(CreateTraceRequest)(trace({ spans: [span(), span()] }))
      const [old, recent, live] = [make(), make(), make()]
      for (const t of [old, recent, live]) yield* traces.create(accountId, t)
      yield* traces.remove(accountId, old.id as TraceId)
      yield* traces.remove(accountId, recent.id as TraceId)
      yield* sql`UPDATE traces SET deleted_at = now() - interval '31 days' WHERE id = ${old.id}`
      yield* sql`UPDATE traces SET deleted_at = now() - interval '29 days' WHERE id = ${recent.id}`
      const removed = yield* Effect.all([purgeDeletedTraces, purgeDeletedTraces, purgeDeletedTraces], {
        concurrency: 3
      })
      const again = yield* purgeDeletedTraces
      return {
        removed: removed.reduce((a, b) => a + b, 0),
        again,
        old: yield* counts([old.id]),
        recent: yield* counts([recent.id]),
        live: yield* counts([live.id])
      }
    }).pipe(Effect.provide([Traces.Default, TraceRepo.Default, AccountRepo.Default]))
  )
  expect(result.removed).toBe(1)
  expect(result.again).toBe(0)
  expect(result.old).toEqual([0, 0])
  expect(result.recent).toEqual([1, 2])
  expect(result.live).toEqual([1, 2])
})
