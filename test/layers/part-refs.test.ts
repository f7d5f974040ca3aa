import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, FastCheck as fc } from "effect"
import { decodeRefs, encodeRefs } from "#layers/traces/PartRefs"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// A span's references as stored (0047_refs_delta_text): the TypeScript coding (PartRefs) and the SQL one
// (tapedeck_refs, tapedeck_refs_text) agree with each other and give back the ids written, whatever the ids.
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

const MAX = 2n ** 62n

/** Id lists as writes make them (mostly ascending by small steps, jumps back and forth), and any ids up to 2^62. */
const idList = fc.oneof(
  fc.array(fc.bigInt({ min: 0n, max: MAX }), { maxLength: 40 }),
  fc
    .tuple(
      fc.bigInt({ min: 1n, max: MAX }),
      fc.array(fc.oneof(fc.bigInt({ min: -3n, max: 3n }), fc.bigInt({ min: -100_000n, max: 100_000n })), {
        maxLength: 80
      })
    )
    .map(([first, steps]) => {
      const ids = [first]
      for (const s of steps) {
        const next = ids[ids.length - 1]! + s
        ids.push(next < 0n ? 0n : next > MAX ? MAX : next)
      }
      return ids
    }),
  fc.bigInt({ min: 0n, max: MAX }).map((id) => [id]),
  fc.array(fc.integer({ min: 1, max: 2 ** 53 - 1 }).map(BigInt), { maxLength: 20 }),
  fc.constant([] as Array<bigint>)
)

const strings = (ids: ReadonlyArray<bigint>) => ids.map((id) => id.toString())

test("the TypeScript coding gives back the ids, in order, from text of small differences", () => {
  fc.assert(
    fc.property(idList, (ids) => {
      const text = encodeRefs(ids)
      expect(decodeRefs(text)).toEqual(strings(ids))
      expect(encodeRefs(strings(ids))).toBe(text)
      if (ids.length === 0) expect(text).toBe("")
      else expect(text.split(",")[0]).toBe(ids[0]!.toString())
    }),
    { numRuns: 2000 }
  )
  expect(encodeRefs([5123456n, 5123457n, 5123458n, 5123418n, 5123420n])).toBe("5123456,1,1,-40,2")
  expect(decodeRefs("5123456,1,1,-40,2")).toEqual(["5123456", "5123457", "5123458", "5123418", "5123420"])
  expect(decodeRefs("9007199254740991,2,-3")).toEqual(["9007199254740991", "9007199254740993", "9007199254740990"])
})

test("tapedeck_refs and tapedeck_refs_text agree with the TypeScript coding", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(idList, { minLength: 1, maxLength: 8 }), async (lists) => {
      const texts = lists.map(encodeRefs)
      const rows = await storage.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{
            i: number
            decoded: ReadonlyArray<string>
            encoded: string
            again: string
            both: ReadonlyArray<string>
          }>`
            SELECT l.i::int AS i, tapedeck_refs(l.t)::text[] AS decoded,
                   ARRAY(SELECT r.id::text FROM tapedeck_span_refs(l.t, NULLIF(l.t, '') || ',1') AS r(id)) AS both,
                   tapedeck_refs_text(tapedeck_refs(l.t)) AS encoded,
                   tapedeck_refs_text(string_to_array(k.ids, ',')::bigint[]) AS again
            FROM json_array_elements_text(${JSON.stringify(texts)}::json) WITH ORDINALITY AS l(t, i)
            JOIN json_array_elements_text(${JSON.stringify(lists.map((ids) => ids.join(",")))}::json) WITH ORDINALITY
              AS k(ids, i) ON k.i = l.i
            ORDER BY l.i`
        }).pipe(Effect.orDie)
      )
      expect(rows.length).toBe(lists.length)
      for (const [k, ids] of lists.entries()) {
        const row = rows[k]!
        expect([...row.decoded]).toEqual(strings(ids))
        expect(row.encoded).toBe(texts[k]!)
        // Both lists of a span as rows (the input's ids, and the output's: the same and one more), in any order.
        const output = ids.length === 0 ? [] : [...ids, ids[ids.length - 1]! + 1n]
        const byValue = (a: string, b: string) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0)
        expect([...row.both].sort(byValue)).toEqual(strings([...ids, ...output]).sort(byValue))
        // The ids themselves coded in SQL.
        expect(row.again).toBe(texts[k]!)
      }
    }),
    { numRuns: 60 }
  )
  const nulls = await storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ a: unknown; b: unknown; c: ReadonlyArray<string> }>`
        SELECT tapedeck_refs(NULL) AS a, tapedeck_refs_text(NULL) AS b, tapedeck_refs('')::text[] AS c`
    }).pipe(Effect.orDie)
  )
  expect(nulls[0]!.a).toBeNull()
  expect(nulls[0]!.b).toBeNull()
  expect([...nulls[0]!.c]).toEqual([])
})
