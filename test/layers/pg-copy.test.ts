import { expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { CopyData } from "#layers/storage/PgCopy"

// CopyData encodes rows as they are added, growing its buffer; the message must be exactly the protocol's CopyData
// ('d', an int32 length that counts itself, the UTF-8 bytes) of the rows joined, whatever the capacity it started with.
const expected = (rows: ReadonlyArray<string>) => {
  const bytes = Buffer.from(rows.join(""))
  const header = Buffer.alloc(5)
  header[0] = 0x64
  header.writeInt32BE(bytes.length + 4, 1)
  return Buffer.concat([header, bytes])
}

test("the message is 'd', its length and the rows' UTF-8, from any starting capacity", () => {
  fc.assert(
    fc.property(
      fc.array(fc.string({ unit: fc.oneof(fc.constant("\n"), fc.constant("\t"), fc.char(), fc.fullUnicode(), fc.char16bits()), maxLength: 400 }), { maxLength: 30 }),
      fc.integer({ min: 0, max: 2048 }),
      (rows, capacity) => {
        const data = new CopyData(capacity)
        for (const row of rows) data.add(row)
        expect(data.message()).toEqual(expected(rows))
      }
    ),
    { numRuns: 2000 }
  )
})

test("one row far larger than the buffer, of 1-, 2-, 3- and 4-byte characters", () => {
  const row = "a é 漢 🙂 ".repeat(50_000) + "\n"
  const data = new CopyData(64)
  data.add("first\n")
  data.add(row)
  data.add("last\n")
  expect(data.message()).toEqual(expected(["first\n", row, "last\n"]))
  expect(CopyData.of(row).message()).toEqual(expected([row]))
})
