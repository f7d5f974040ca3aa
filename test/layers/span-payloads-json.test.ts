import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { AccountRepo } from "#layers/storage/AccountRepo"
import spanPayloadsJson from "#layers/storage/migrations/0018_span_payloads_json"
import shareTriggerWhen from "#layers/storage/migrations/0034_share_trigger_when"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// Migration 0018: a span's payload columns are `json` (the text as written), converted from the `jsonb` they were.
const backend = process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

const PAYLOADS = ["input", "output", "metadata", "extra"]

const columnTypes = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  return yield* sql<{ column: string; type: string; method: string }>`
    SELECT a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type, a.attcompression::text AS method
    FROM pg_attribute a WHERE a.attrelid = 'spans'::regclass AND a.attname = ANY(${PAYLOADS}) ORDER BY 1`
})

test("0018 turns stored jsonb payloads into json with the same values, and keeps lz4 where the server has it", async () => {
  const stored = {
    input: { messages: [{ role: "user", content: 'é ✓ \\ " \n' }], zeta: 1, alpha: [1.5, null, true] },
    output: null,
    metadata: { "service.name": "agent", otel: { kind: 3 } },
    extra: { vendor_field: "x" }
  }
  const { before, after, row } = await storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const accountId = yield* (yield* AccountRepo).ensure("payloads-json")
      // A database from before 0018: the columns back to jsonb, a span stored in them (and no split trigger yet,
      // whose condition names the payload columns: 0034).
      yield* sql`DROP TRIGGER spans_share ON spans`
      yield* sql.unsafe(
        `ALTER TABLE spans ${PAYLOADS.map((c) => `ALTER COLUMN ${c} TYPE jsonb USING ${c}::jsonb`).join(", ")}`
      )
      const before = yield* columnTypes
      const traceId = crypto.randomUUID()
      yield* sql`
      INSERT INTO spans (trace_id, account_id, id, span_type, name, input, output, metadata, extra, started_at)
      VALUES (${traceId}::uuid, ${accountId}::uuid, gen_random_uuid(), 'llm_call', 'old', ${JSON.stringify(stored.input)}::jsonb,
              'null'::jsonb, ${JSON.stringify(stored.metadata)}::jsonb, ${JSON.stringify(stored.extra)}::jsonb, now())`
      yield* spanPayloadsJson
      yield* shareTriggerWhen
      const [row] = yield* sql<{ input: string; output: string | null; metadata: string; extra: string }>`
      SELECT input::text AS input, output::text AS output, metadata::text AS metadata, extra::text AS extra
      FROM spans WHERE trace_id = ${traceId}::uuid`
      return { before, after: yield* columnTypes, row: row! }
    }).pipe(Effect.provide(AccountRepo.Default))
  )
  expect(before.map((c) => c.type)).toEqual(["jsonb", "jsonb", "jsonb", "jsonb"])
  expect(after.map((c) => c.type)).toEqual(["json", "json", "json", "json"])
  expect(after.filter((c) => c.method !== (backend === "postgresql" ? "l" : ""))).toEqual([])
  expect(JSON.parse(row.input)).toEqual(stored.input)
  expect(row.output).toBe("null") // a JSON null stays a JSON null, not SQL NULL
  expect(JSON.parse(row.metadata)).toEqual(stored.metadata)
  expect(JSON.parse(row.extra)).toEqual(stored.extra)
})
