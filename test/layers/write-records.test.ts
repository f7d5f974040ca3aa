import { expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { jsonLengthBound, SHARE_CHARS, splitPayload } from "#layers/traces/PayloadSplit"
import { toRecord, toRecordsJson } from "#layers/traces/SpanRecords"

// The write records of spans (`toRecordsJson`) and the size test that spares serializing small payloads twice.
const text = (maxLength: number) =>
  fc.string({
    unit: fc.oneof(fc.char(), fc.constantFrom("é", "😀", "\ud83d", "\u2028", '"', "\\", "\n", "\u0001")),
    maxLength
  })
const json: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    text(400),
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 6 }),
    fc.dictionary(text(12), tie("value"), { maxKeys: 6 })
  )
})).value

test("jsonLengthBound: below its limit, never less than the length of JSON.stringify's text", () => {
  fc.assert(
    fc.property(json, fc.integer({ min: 1, max: 3000 }), (value, limit) => {
      const bound = jsonLengthBound(value, limit)
      const length = (JSON.stringify(value) ?? "").length
      if (bound < limit) expect(length).toBeLessThanOrEqual(bound)
    }),
    { numRuns: 2000 }
  )
  // Exact for text with nothing to escape: a small chat payload is told apart without being serialized.
  const payload = { messages: [{ role: "user", content: "x".repeat(300) }], n: 1 }
  expect(jsonLengthBound(payload, SHARE_CHARS)).toBeLessThan(SHARE_CHARS)
  expect(jsonLengthBound({ s: "x".repeat(SHARE_CHARS) }, SHARE_CHARS)).toBeGreaterThanOrEqual(SHARE_CHARS)
})

const payload = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  json,
  fc.array(fc.record({ role: fc.constantFrom("user", "tool"), content: text(500) }), { maxLength: 8 })
)
const spanOf = fc.record({
  id: fc.uuid(),
  parent_id: fc.constant(null),
  span_type: fc.constant("llm_call"),
  name: text(20),
  started_at: fc.constant("2026-01-01T00:00:00.000Z"),
  input: payload,
  output: payload
})

test("a span's write record holds its columns, and each payload inline as written or split as splitPayload splits it", () => {
  fc.assert(
    fc.property(fc.array(spanOf, { maxLength: 6 }), (spans) => {
      const records = JSON.parse(toRecordsJson(spans as never)) as Array<Record<string, unknown>>
      expect(records.length).toBe(spans.length)
      spans.forEach((span, i) => {
        const {
          input,
          output,
          input_skel,
          input_parts,
          input_hashes,
          output_skel,
          output_parts,
          output_hashes,
          ...rest
        } = records[i]!
        const { input: _i, output: _o, ...columns } = toRecord(span as never)
        expect(rest).toEqual(JSON.parse(JSON.stringify(columns)))
        for (const [value, inline, skel] of [
          [span.input, input, input_skel],
          [span.output, output, output_skel]
        ] as const) {
          const split = splitPayload(value)
          if (split === undefined) {
            // Inline: JSON.stringify's text (a JSON null is a flag beside it, not a value).
            expect(JSON.stringify(inline) as string | undefined).toBe(
              value === null ? undefined : JSON.stringify(value)
            )
            expect(skel).toBeUndefined()
          } else {
            expect(inline).toBeUndefined()
            expect(skel).toBe(split.skel)
          }
        }
        for (const list of [input_parts, input_hashes, output_parts, output_hashes])
          expect(list === undefined || Array.isArray(list)).toBe(true)
      })
    }),
    { numRuns: 200 }
  )
})
