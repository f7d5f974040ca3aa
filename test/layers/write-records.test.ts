import { expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { splitPayload } from "#layers/traces/PayloadSplit"
import { toFields, toRecordsJson } from "#layers/traces/SpanRecords"

// The write records of spans (`toRecordsJson`): each payload serialized once and put into the statement's JSON as is.
const text = fc.string({
  unit: fc.oneof(fc.char(), fc.constantFrom("é", "😀", "\u2028", '"', "\\", "\n")),
  maxLength: 400
})
const payload = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.jsonValue(),
  fc.array(fc.record({ role: fc.constantFrom("user", "tool"), content: text }), { maxLength: 8 })
)
const spanOf = fc.record({
  id: fc.uuid(),
  parent_id: fc.constant(null),
  span_type: fc.constant("llm_call"),
  name: text,
  started_at: fc.constant("2026-01-01T00:00:00.000Z"),
  input: payload,
  output: payload,
  cost: fc.option(fc.double({ noNaN: true, noDefaultInfinity: true }), { nil: undefined }),
  vendor: fc.option(fc.jsonValue(), { nil: undefined })
})

test("a span's write record is valid JSON with its columns, and its payloads inline as written or split", () => {
  fc.assert(
    fc.property(fc.array(spanOf, { maxLength: 6 }), (spans) => {
      const records = JSON.parse(toRecordsJson(spans as never)) as Array<Record<string, unknown>>
      expect(records.length).toBe(spans.length)
      spans.forEach((span, i) => {
        const record = records[i]!
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
        } = record
        expect(rest).toEqual(JSON.parse(JSON.stringify(toFields(span as never))))
        for (const [value, inline, skel] of [
          [span.input, input, input_skel],
          [span.output, output, output_skel]
        ] as const) {
          const split = value === null || value === undefined ? undefined : splitPayload(value)
          if (split === undefined) {
            // Inline: the same text JSON.stringify gives (a JSON null is the flag, not a value).
            expect(inline === undefined ? undefined : JSON.stringify(inline)).toBe(
              value === null || value === undefined ? undefined : JSON.stringify(value)
            )
            expect(skel).toBeUndefined()
          } else {
            expect(inline).toBeUndefined()
            expect(skel).toBe(split.skel)
          }
        }
        expect(
          [input_parts, input_hashes, output_parts, output_hashes].every((p) => p === undefined || Array.isArray(p))
        ).toBe(true)
      })
    }),
    { numRuns: 200 }
  )
})
