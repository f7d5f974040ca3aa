import { expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { CopyData, copyJson, copyText, copyTextArray } from "#layers/storage/PgCopy"
import { textArray } from "#layers/storage/SqlArrays"

// CopyData encodes each string as it is added, growing its buffer; the message must be exactly the protocol's CopyData
// ('d', an int32 length that counts itself, then each string's UTF-8 in turn), whatever the capacity it started with.
// Each string is encoded on its own: a lone surrogate at the end of one and another at the start of the next are two
// replacement characters, not a pair (rows end in a newline and fields are tab-separated, so no real pair is split).
const expected = (rows: ReadonlyArray<string>) => {
  const bytes = Buffer.concat(rows.map((row) => Buffer.from(row)))
  const header = Buffer.alloc(5)
  header[0] = 0x64
  header.writeInt32BE(bytes.length + 4, 1)
  return Buffer.concat([header, bytes])
}

test("the message is 'd', its length and the rows' UTF-8, from any starting capacity", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.string({
          unit: fc.oneof(fc.constant("\n"), fc.constant("\t"), fc.char(), fc.fullUnicode(), fc.char16bits()),
          maxLength: 400
        }),
        { maxLength: 30 }
      ),
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

const text = fc.string({
  unit: fc.oneof(
    fc.constantFrom("\\", "\t", "\n", "\r", "\\N", "\u0000"),
    fc.char(),
    fc.fullUnicode(),
    fc.char16bits()
  ),
  maxLength: 60
})

test("rows of fields are the fields joined by tabs, one line each, however the buffer grows", () => {
  fc.assert(
    fc.property(
      fc.array(fc.array(text, { maxLength: 8 }), { maxLength: 20 }),
      fc.integer({ min: 0, max: 512 }),
      (rows, capacity) => {
        const data = new CopyData(capacity)
        for (const row of rows) data.addRow(row)
        expect(data.message()).toEqual(expected(rows.map((row) => row.join("\t") + "\n")))
      }
    ),
    { numRuns: 2000 }
  )
})

// The escaping as COPY's text format defines it, one character class at a time.
const reference = (s: string) =>
  s.replace(/\\/g, "\\\\").replace(/\t/g, "\\t").replace(/\n/g, "\\n").replace(/\r/g, "\\r")

test("copyText escapes backslash, tab, newline and carriage return; copyJson is copyText of the JSON", () => {
  fc.assert(
    fc.property(text, fc.jsonValue(), (s, json) => {
      expect(copyText(s)).toBe(reference(s))
      expect(copyJson(json)).toBe(reference(JSON.stringify(json)))
      expect(copyJson({ s, json })).toBe(reference(JSON.stringify({ s, json })))
      expect(copyText({ s })).toBe(copyJson({ s }))
    }),
    { numRuns: 3000 }
  )
  expect(copyText(null)).toBe("\\N")
  expect(copyText(undefined)).toBe("\\N")
  expect(copyText(12.5)).toBe("12.5")
})

test("copyTextArray is copyText of the array literal, with NULL for a null element", () => {
  fc.assert(
    fc.property(fc.array(fc.option(text, { nil: null })), (values) => {
      const literal = `{${values.map((v) => (v === null ? "NULL" : textArray([v]).slice(1, -1))).join(",")}}`
      expect(copyTextArray(values)).toBe(reference(literal))
      if (!values.includes(null)) expect(copyTextArray(values)).toBe(copyText(textArray(values as Array<string>)))
    }),
    { numRuns: 3000 }
  )
  expect(copyTextArray([])).toBe("{}")
  expect(copyTextArray(['a"b\\c', null, "t\tn\n"])).toBe('{"a\\\\"b\\\\\\\\c",NULL,"t\\tn\\n"}')
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
