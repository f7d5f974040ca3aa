import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// Migration 0017: large values of the hot tables are compressed with lz4 where PostgreSQL has it (it does here: Debian's
// build), and the migration is a no-op where it does not (PGlite).
const backend = process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

const COLUMNS = [
  "stream_events.groups",
  "spans.input",
  "spans.output",
  "spans.metadata",
  "spans.extra",
  "spans.error",
  "traces.input",
  "traces.output",
  "traces.metadata",
  "jobs.payload",
  "jobs.result",
  "jobs.error"
]

test("large values go in compressed with lz4 on PostgreSQL (pglz left as is on PGlite), and read back unchanged", async () => {
  const { methods, stored, read } = await storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const methods = yield* sql<{ column: string; method: string }>`
      SELECT c.relname || '.' || a.attname AS column, a.attcompression::text AS method
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
      WHERE c.relname || '.' || a.attname = ANY(${COLUMNS}) AND c.relnamespace = 'public'::regnamespace
      ORDER BY 1`
      const accountId = yield* (yield* AccountRepo).ensure("compression")
      // ~60 KB of JSON that compresses well: TOAST compresses it inline.
      const stored = {
        messages: Array.from({ length: 600 }, (_, i) => ({
          role: i % 2 ? "user" : "assistant",
          content: `turn ${i} `.repeat(8)
        }))
      }
      const traceId = crypto.randomUUID()
      yield* sql`
      INSERT INTO spans (trace_id, account_id, id, span_type, name, input, started_at)
      VALUES (${traceId}::uuid, ${accountId}::uuid, gen_random_uuid(), 'llm_call', 'big', ${JSON.stringify(stored)}::jsonb, now())`
      const [read] = yield* sql<{ input: unknown; method: string | null }>`
      SELECT input, pg_column_compression(input) AS method FROM spans WHERE trace_id = ${traceId}::uuid`
      return { methods, stored, read: read! }
    }).pipe(Effect.provide(AccountRepo.Default))
  )
  expect(methods.map((m) => m.column).sort()).toEqual([...COLUMNS].sort())
  const expected = backend === "postgresql" ? "l" : ""
  expect(methods.filter((m) => m.method !== expected)).toEqual([])
  expect(read.input).toEqual(stored)
  expect(read.method).toBe(backend === "postgresql" ? "lz4" : "pglz")
})
