import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, FastCheck as fc } from "effect"
import { textArray } from "#layers/storage/SqlArrays"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

// PostgreSQL cannot store NUL in text; everything else must come back as it went in.
const text = fc.string({ unit: "binary" }).map((s) => s.replaceAll("\u0000", ""))
const HOSTILE = ['"', "\\", '\\"', "{", "}", ",", " ", "", "NULL", "null", "a b", "{a,b}", "ünï 🙂"]

test("textArray: a text[] literal that PostgreSQL reads back as the same strings, in order", async () => {
  const readBack = (values: ReadonlyArray<string>) =>
    storage.run(
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ v: Array<string> }>`SELECT ${textArray(values)}::text[] AS v`.pipe(Effect.map((rows) => rows[0]!.v))
      )
    )
  expect(await readBack(HOSTILE)).toEqual(HOSTILE)
  expect(await readBack([])).toEqual([])
  await fc.assert(
    fc.asyncProperty(fc.array(fc.oneof(text, fc.constantFrom(...HOSTILE)), { maxLength: 8 }), async (values) => {
      expect(await readBack(values)).toEqual(values)
    }),
    { numRuns: 100 }
  )
})
