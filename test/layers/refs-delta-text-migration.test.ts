import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import refsDeltaText from "#layers/storage/migrations/0047_refs_delta_text"
import { decodeRefs } from "#layers/traces/PartRefs"
import { withPayloads } from "#layers/traces/SharedParts"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// Migration 0047 on a database written before it: every span's references (bigint[]) become the delta text and
// decode to the same ids in the same order, NULLs stay NULL, payloads read back the same, and the triggers (split,
// delete, rewrite) work on the new columns. More spans than one batch (5,000), so that the batches' key order counts.
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

const ACCOUNT = "00000000-0000-4000-8000-0000000000c7"
const TRACE = "00000000-0000-4000-8000-0000000000c8"
const SPANS = 12_001
/** Parts with ids far apart, one near 2^62, so that differences are large, negative and small. */
const PART_IDS = ["7", "8", "9", "100000", "4611686018427387000"]

interface Row {
  readonly id: string
  readonly input_refs: string | null
  readonly output_refs: string | null
}

test("0047 converts every span's references in batches, and reads, writes and releases work on the text", async () => {
  const result = await storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      // The schema as 0045 left it (the triggers' functions read the columns by name only).
      yield* sql`DROP TRIGGER spans_share ON spans`
      yield* sql`DROP TRIGGER spans_release_rewritten ON spans`
      yield* sql`ALTER TABLE spans DROP COLUMN input_refs, DROP COLUMN output_refs`
      yield* sql`ALTER TABLE spans ADD COLUMN input_refs bigint[], ADD COLUMN output_refs bigint[]`
      yield* sql`DROP FUNCTION tapedeck_refs(text), tapedeck_refs_text(bigint[])`
      yield* sql`
        INSERT INTO span_contents (id, account_id, hash, body)
        SELECT p.id::bigint, ${ACCOUNT}::uuid, sha256(convert_to(p.id, 'UTF8')), '"part ' || p.id || '"'
        FROM unnest(${`{${PART_IDS.join(",")}}`}::text[]) AS p(id)`
      // Span g: input inline (every 4th), or two to four parts in an order that varies; output a part every 5th.
      yield* sql`
        INSERT INTO spans (trace_id, account_id, id, span_type, name, started_at, input, input_skel, input_refs,
                           output_skel, output_refs)
        SELECT ${TRACE}::uuid, ${ACCOUNT}::uuid, md5('span' || g)::uuid, 'llm_call', 'step', now(),
               CASE WHEN g % 4 = 0 THEN '"small"'::json END,
               CASE WHEN g % 4 <> 0 THEN '[' || array_to_string(array_fill(chr(1), ARRAY[2 + g % 3]), ',') || ']' END,
               CASE WHEN g % 4 <> 0 THEN ARRAY(
                 SELECT p[1 + (g * 7 + 3 * j) % 5]
                 FROM generate_series(0, 1 + g % 3) j, (SELECT ${`{${PART_IDS.join(",")}}`}::bigint[] AS p) ps
                 ORDER BY j) END,
               CASE WHEN g % 5 = 0 THEN chr(1) END,
               CASE WHEN g % 5 = 0 THEN ARRAY[${PART_IDS[4]!}::bigint] END
        FROM generate_series(1, ${SPANS}) g`
      const before = yield* sql<{
        id: string
        input_refs: ReadonlyArray<string> | null
        output_refs: ReadonlyArray<string> | null
      }>`
        SELECT id::text AS id, input_refs::text[] AS input_refs, output_refs::text[] AS output_refs FROM spans
        WHERE trace_id = ${TRACE}::uuid`

      yield* refsDeltaText
      const types = yield* sql<{ name: string; type: string }>`
        SELECT attname AS name, format_type(atttypid, atttypmod) AS type FROM pg_attribute
        WHERE attrelid = 'spans'::regclass AND attname IN ('input_refs', 'output_refs', 'input_refs_text', 'output_refs_text')
          AND NOT attisdropped ORDER BY attname`
      const after = yield* sql<
        Row & { decoded_in: ReadonlyArray<string> | null; decoded_out: ReadonlyArray<string> | null }
      >`
        SELECT id::text AS id, input_refs, output_refs, tapedeck_refs(input_refs)::text[] AS decoded_in,
               tapedeck_refs(output_refs)::text[] AS decoded_out
        FROM spans WHERE trace_id = ${TRACE}::uuid`
      // Run again: nothing left to convert, nothing changes.
      yield* refsDeltaText
      const again = yield* sql<Row>`
        SELECT id::text AS id, input_refs, output_refs FROM spans WHERE trace_id = ${TRACE}::uuid`
      const triggers = yield* sql<{ name: string }>`
        SELECT tgname AS name FROM pg_trigger WHERE tgrelid = 'spans'::regclass AND NOT tgisinternal ORDER BY tgname`
      // Read as the service reads: the payloads put together from the parts.
      const sample = yield* sql<
        Row & { input: string | null; output: string | null; input_skel: string | null; output_skel: string | null }
      >`
        SELECT id::text AS id, input::text AS input, output::text AS output, input_skel, input_refs, output_skel, output_refs
        FROM spans WHERE trace_id = ${TRACE}::uuid AND id IN (md5('span1')::uuid, md5('span5')::uuid, md5('span4')::uuid)`
      const read = yield* withPayloads(sql, sample)

      // The split trigger stores what it resolves as text.
      const written = "00000000-0000-4000-8000-0000000000c9"
      yield* sql`
        INSERT INTO spans (trace_id, account_id, id, span_type, name, started_at, input_skel, input_parts, input_hashes)
        VALUES (${TRACE}::uuid, ${ACCOUNT}::uuid, ${written}::uuid, 'llm_call', 'w', now(), '[' || chr(1) || ',' || chr(1) || ']',
                ARRAY[NULL, NULL]::text[],
                ARRAY[encode(sha256(convert_to('4611686018427387000', 'UTF8')), 'hex'), encode(sha256(convert_to('7', 'UTF8')), 'hex')])`
      const [split] = yield* sql<{ refs: string }>`SELECT input_refs AS refs FROM spans WHERE id = ${written}::uuid`
      // A writer of the version before sends the references as arrays (cast to text on assignment): stored coded.
      const old = "00000000-0000-4000-8000-0000000000ca"
      yield* sql`
        INSERT INTO spans (trace_id, account_id, id, span_type, name, started_at, input_skel, input_refs, output_skel, output_refs)
        SELECT ${TRACE}::uuid, ${ACCOUNT}::uuid, ${old}::uuid, 'llm_call', 'old', now(), x.input_skel, x.input_refs,
               x.output_skel, x.output_refs
        FROM json_to_recordset(${JSON.stringify([{ input_skel: "[\u0001,\u0001]", input_refs: [9, 7], output_skel: "\u0001", output_refs: [100000] }])}::json)
          AS x(input_skel text, input_refs bigint[], output_skel text, output_refs bigint[])`
      const [sentOld] = yield* sql<{ input_refs: string; output_refs: string }>`
        SELECT input_refs, output_refs FROM spans WHERE id = ${old}::uuid`
      yield* sql`DELETE FROM spans WHERE id = ${old}::uuid`
      yield* sql`UPDATE span_contents SET orphaned_at = NULL`

      // An upsert that rewrites a span's references releases those it no longer holds (the rewrite trigger).
      yield* sql`UPDATE spans SET output_skel = NULL, output_refs = NULL WHERE trace_id = ${TRACE}::uuid AND id = md5('span10')::uuid`
      const rewritten = yield* sql<{ id: string }>`
        SELECT id::text AS id FROM span_contents WHERE orphaned_at IS NOT NULL ORDER BY id`
      yield* sql`UPDATE span_contents SET orphaned_at = NULL`

      // A deferred delete (the purge's) records the parts; a plain one marks them.
      const deferred = yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SELECT set_config('tapedeck.release_parts', 'deferred', true)`
          yield* sql`DELETE FROM spans WHERE trace_id = ${TRACE}::uuid AND id = md5('span1')::uuid`
          return yield* sql<{ part_id: string }>`
            SELECT part_id::text AS part_id FROM span_contents_released WHERE account_id = ${ACCOUNT}::uuid ORDER BY part_id`
        })
      )
      yield* sql`DELETE FROM spans WHERE trace_id = ${TRACE}::uuid AND id = ${written}::uuid`
      const marked = yield* sql<{ id: string }>`
        SELECT id::text AS id FROM span_contents WHERE orphaned_at IS NOT NULL ORDER BY id`
      return { before, types, after, again, triggers, read, split, sentOld, rewritten, deferred, marked }
    })
  )
  expect(result.types).toEqual([
    { name: "input_refs", type: "text" },
    { name: "output_refs", type: "text" }
  ])
  expect(result.after.length).toBe(SPANS)
  const before = new Map(result.before.map((r) => [r.id, r]))
  let converted = 0
  for (const row of result.after) {
    const old = before.get(row.id)!
    const want = (refs: ReadonlyArray<string> | null) => (refs === null ? null : [...refs])
    expect(row.decoded_in === null ? null : [...row.decoded_in]).toEqual(want(old.input_refs))
    expect(row.decoded_out === null ? null : [...row.decoded_out]).toEqual(want(old.output_refs))
    expect(row.input_refs === null ? null : decodeRefs(row.input_refs)).toEqual(want(old.input_refs))
    expect(row.output_refs === null ? null : decodeRefs(row.output_refs)).toEqual(want(old.output_refs))
    if (row.input_refs !== null) converted++
  }
  expect(converted).toBe(SPANS - Math.floor(SPANS / 4))
  expect(new Map(result.again.map((r) => [r.id, r]))).toEqual(
    new Map(result.after.map((r) => [r.id, { id: r.id, input_refs: r.input_refs, output_refs: r.output_refs }]))
  )
  expect(result.triggers.map((t) => t.name)).toEqual([
    "spans_release_deleted",
    "spans_release_rewritten",
    "spans_share"
  ])

  const part = (id: string) => `"part ${id}"`
  const read = new Map(result.read.map((r) => [r.id, r]))
  const refsOf = (g: number) => Array.from({ length: 2 + (g % 3) }, (_, j) => PART_IDS[(g * 7 + 3 * j) % 5]!)
  const span1 = [...read.values()].find(
    (r) => r.output === null && r.input !== '"small"' && r.input?.split(",").length === 3
  )
  expect(span1?.input).toBe(`[${refsOf(1).map(part).join(",")}]`)
  const span5 = [...read.values()].find((r) => r.output !== null)!
  expect(span5.input).toBe(`[${refsOf(5).map(part).join(",")}]`)
  expect(span5.output).toBe(part(PART_IDS[4]!))
  expect([...read.values()].filter((r) => r.input === '"small"').length).toBe(1)

  expect(decodeRefs(result.split!.refs)).toEqual([PART_IDS[4]!, PART_IDS[0]!])
  expect(result.sentOld).toEqual({ input_refs: "9,-2", output_refs: "100000" })
  // Span 10 keeps its input's parts (7, 100000, 8) and drops its output's.
  expect(refsOf(10)).toEqual([PART_IDS[0]!, PART_IDS[3]!, PART_IDS[1]!])
  expect(result.rewritten.map((r) => r.id)).toEqual([PART_IDS[4]!])
  expect(result.deferred.map((r) => r.part_id).sort((a, b) => Number(a) - Number(b))).toEqual(
    [...new Set(refsOf(1))].sort((a, b) => Number(a) - Number(b))
  )
  // The plain delete marked both of the written span's parts, though other spans still reference them (the sweep
  // keeps those: it checks references before it deletes).
  expect(result.marked.map((r) => r.id).sort((a, b) => Number(a) - Number(b))).toEqual([PART_IDS[0]!, PART_IDS[4]!])
})
