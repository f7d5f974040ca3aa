import { expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import {
  jsonLengthBound,
  jsonLengthFloor,
  partHasher,
  SHARE_BYTES,
  type SplitPayload,
  splitPayload
} from "#layers/traces/PayloadSplit"
import { toRecord, toRecordsJson } from "#layers/traces/SpanRecords"
import { skeletonText } from "#layers/traces/PartPacking"

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

test("jsonLengthBound: below its limit, never less than the UTF-8 length of JSON.stringify's text", () => {
  fc.assert(
    fc.property(json, fc.integer({ min: 1, max: 3000 }), (value, limit) => {
      const bound = jsonLengthBound(value, limit)
      const length = Buffer.byteLength(JSON.stringify(value) ?? "")
      if (bound < limit) expect(length).toBeLessThanOrEqual(bound)
    }),
    { numRuns: 2000 }
  )
  // Exact for text with nothing to escape: a small chat payload is told apart without being serialized.
  const payload = { messages: [{ role: "user", content: "x".repeat(300) }], n: 1 }
  expect(jsonLengthBound(payload, SHARE_BYTES)).toBeLessThan(SHARE_BYTES)
  expect(jsonLengthBound({ s: "x".repeat(SHARE_BYTES) }, SHARE_BYTES)).toBeGreaterThanOrEqual(SHARE_BYTES)
})

test("jsonLengthFloor: at or above its limit, never more than the UTF-8 length of JSON.stringify's text", () => {
  // Values JSON.stringify leaves out or turns into null, beside JSON's own.
  const withOddities = fc.oneof(
    json,
    fc.constant(undefined),
    fc.constant(() => 1),
    fc.constant(Symbol("s"))
  )
  const value = fc.oneof(json, fc.array(withOddities, { maxLength: 6 }), fc.dictionary(text(12), withOddities))
  fc.assert(
    fc.property(value, fc.integer({ min: 1, max: 3000 }), (value, limit) => {
      const floor = jsonLengthFloor(value, limit)
      const length = Buffer.byteLength(JSON.stringify(value) ?? "")
      if (floor >= limit) expect(length).toBeGreaterThanOrEqual(limit)
      else expect(floor).toBeLessThanOrEqual(length)
    }),
    { numRuns: 2000 }
  )
  // An inherited key is not JSON's: it does not count.
  const inherits = Object.create({ inherited: "x".repeat(SHARE_BYTES) })
  expect(jsonLengthFloor(inherits, SHARE_BYTES)).toBeLessThan(SHARE_BYTES)
  expect(jsonLengthFloor({ s: "x".repeat(SHARE_BYTES) }, SHARE_BYTES)).toBeGreaterThanOrEqual(SHARE_BYTES)
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
          const partOfBatch = inline === undefined && skel === "\x01" && split === undefined
          if (partOfBatch) {
            // Small, but a part of another span's split payload: referenced (`asBatchPart`), its text sent there.
            const wholeText = JSON.stringify(value)
            const hashes = value === span.input ? input_hashes : output_hashes
            expect(hashes).toEqual([partHasher()(wholeText)])
            expect(records.some((r) => JSON.stringify(r).includes(JSON.stringify(wholeText).slice(1, -1)))).toBe(true)
          } else if (split === undefined) {
            // Inline: JSON.stringify's text (a JSON null is a flag beside it, not a value).
            expect(JSON.stringify(inline) as string | undefined).toBe(
              value === null ? undefined : JSON.stringify(value)
            )
            expect(skel).toBeUndefined()
          } else {
            expect(inline).toBeUndefined()
            expect(skeletonText(skel as string)).toBe(split.skel)
            // Stored packed only when that is smaller (PartPacking.packSkeleton).
            expect(Buffer.byteLength(skel as string)).toBeLessThanOrEqual(Buffer.byteLength(split.skel))
          }
        }
        for (const list of [input_parts, input_hashes, output_parts, output_hashes])
          expect(list === undefined || Array.isArray(list)).toBe(true)
      })
    }),
    { numRuns: 200 }
  )
})

test("a small payload that is a part of the batch (an answer the next call's history repeats) is referenced, not stored again", () => {
  const answer = (i: number) => ({ role: "assistant", content: `answer ${i} ${"a".repeat(200)}`, tool_calls: [] })
  const history = [{ role: "system", content: "s".repeat(1200) }]
  const spans = Array.from({ length: 4 }, (_, i) => {
    const input = { messages: [...history] }
    history.push(answer(i) as never)
    return {
      id: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
      parent_id: null,
      span_type: "llm_call",
      name: "step",
      started_at: "2026-01-01T00:00:00.000Z",
      input,
      output: answer(i)
    }
  })
  // A lone small payload, and one that no other span holds, stay inline.
  const lone = { ...spans[0]!, id: "00000000-0000-4000-8000-000000000009", input: answer(9), output: "small" }
  const records = JSON.parse(toRecordsJson([...spans, lone] as never)) as Array<Record<string, unknown>>
  const hash = partHasher()
  for (let i = 0; i < 3; i++) {
    expect(records[i]!.output).toBeUndefined()
    expect(records[i]!.output_skel).toBe("\x01")
    expect(records[i]!.output_hashes).toEqual([hash(JSON.stringify(answer(i)))])
    // The next call's history holds it, split: its hash is among that record's parts.
    expect(records[i + 1]!.input_hashes as Array<string>).toContain(hash(JSON.stringify(answer(i))))
  }
  expect(records[3]!.output).toEqual(answer(3))
  expect(records[4]!.input).toEqual(answer(9))
  expect(records[4]!.output).toBe("small")
  // Nothing split in the batch: written as it was.
  const small = JSON.parse(toRecordsJson([{ ...lone, input: answer(1), output: answer(1) }] as never))
  expect(small[0].output).toEqual(answer(1))
})

test("a batch's spans that repeat messages are split as each alone: the batch's memo of cut messages changes nothing", () => {
  const message = fc.record({
    role: fc.constantFrom("user", "tool"),
    content: fc.oneof(text(40), text(600)),
    extra: fc.dictionary(text(8), fc.oneof(text(60), fc.integer()), { maxKeys: 8 })
  })
  // The same messages at different depths (under arrays nested up to the split's depth limit and beyond).
  const nest = (value: unknown, levels: number): unknown => (levels === 0 ? value : [nest(value, levels - 1)])
  const spans = fc
    .tuple(
      fc.array(message, { minLength: 1, maxLength: 8 }),
      fc.array(fc.tuple(fc.nat(8), fc.integer({ min: 0, max: 8 })), { minLength: 1, maxLength: 6 })
    )
    .map(([history, calls]) =>
      calls.map(([n, levels], i) => ({
        id: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
        parent_id: null,
        span_type: "llm_call",
        name: "step",
        started_at: "2026-01-01T00:00:00.000Z",
        input: nest({ messages: history.slice(0, n + 1) }, levels),
        output: history[n % history.length]
      }))
    )
  fc.assert(
    fc.property(spans, (batch) => {
      const records = JSON.parse(toRecordsJson(batch as never)) as Array<Record<string, unknown>>
      batch.forEach((span, i) => {
        for (const column of ["input", "output"] as const) {
          const alone = splitPayload(span[column])
          const skel = records[i]![`${column}_skel`] as string | undefined
          if (alone === undefined && skel !== undefined) {
            // Small, and a part of another span's payload in the batch: referenced as that part (`asBatchPart`).
            const whole = JSON.stringify(span[column])
            expect(skel).toBe("\x01")
            expect(records[i]![`${column}_hashes`]).toEqual([partHasher()(whole)])
            continue
          }
          expect(skel && skeletonText(skel)).toBe(alone?.skel)
          expect(records[i]![`${column}_hashes`]).toEqual(alone?.hashes)
        }
      })
    }),
    { numRuns: 300 }
  )
})

/** The payload's text from its split: the skeleton with each hole filled by its part, in order. */
const assembled = (split: SplitPayload) => {
  const pieces = split.skel.split("\x01")
  return pieces.reduce((text, piece, i) => (i === 0 ? piece : text + split.parts[i - 1]! + piece), "")
}

test("values with toJSON: the split puts back together as JSON.stringify's text, alone or after the same text in a batch", () => {
  const long = fc.oneof(text(40), fc.string({ minLength: 260, maxLength: 600 }))
  // An object whose JSON text is toJSON's value, not its entries (which are large, and would be cut if read).
  const withToJson: fc.Arbitrary<unknown> = fc
    .tuple(fc.oneof(long, fc.dictionary(text(6), long, { maxKeys: 3 })), fc.string({ minLength: 300, maxLength: 400 }))
    .map(([shown, hidden]) => ({ toJSON: () => shown, hidden }))
  const leaf = fc.oneof(long, withToJson, fc.integer())
  const message = fc.record({ role: fc.constantFrom("user", "tool"), content: leaf, extra: leaf })
  const value = fc.oneof(
    fc.array(message, { minLength: 1, maxLength: 6 }),
    fc.record({ messages: fc.array(message, { maxLength: 6 }), result: leaf }),
    withToJson
  )
  fc.assert(
    fc.property(value, (v) => {
      const alone = splitPayload(v)
      if (alone !== undefined) expect(assembled(alone)).toBe(JSON.stringify(v))
      // The same text as plain JSON after it, with one hasher (a batch's memo of cut messages).
      const plain = JSON.parse(JSON.stringify(v)) as unknown
      const hash = partHasher()
      splitPayload(v, undefined, hash)
      const after = splitPayload(plain, undefined, hash)
      if (after !== undefined) expect(assembled(after)).toBe(JSON.stringify(plain))
    }),
    { numRuns: 300 }
  )
})

test("property: a payload is split exactly when its JSON text reaches SHARE_BYTES bytes, and puts back together as that text", () => {
  // Messages whose sizes add up to around the threshold, in characters of one to four UTF-8 bytes.
  const near = fc.array(
    fc.record({
      role: fc.constantFrom("user", "tool"),
      content: fc.oneof(
        text(300),
        fc.string({ unit: fc.constantFrom("a", "é", "✓", "😀"), minLength: 60, maxLength: 400 })
      )
    }),
    { minLength: 1, maxLength: 6 }
  )
  const shaped = fc.oneof(
    near,
    near.map((messages) => ({ messages, model: "m" })),
    json
  )
  fc.assert(
    fc.property(shaped, (value) => {
      const text = JSON.stringify(value) ?? ""
      const bytes = Buffer.byteLength(text)
      const split = splitPayload(value)
      if (bytes < SHARE_BYTES) expect(split).toBeUndefined()
      if (split !== undefined) {
        const pieces = split.skel.split("\x01")
        expect(pieces.length).toBe(split.parts.length + 1)
        expect(pieces.map((p, i) => p + (split.parts[i] ?? "")).join("")).toBe(text)
      }
      // A string of CUT_BYTES or more is always in some part: such a payload over the threshold is split.
      const large = (v: unknown): boolean =>
        typeof v === "string"
          ? Buffer.byteLength(JSON.stringify(v)) >= 256
          : typeof v === "object" && v !== null && Object.values(v).some(large)
      if (bytes >= SHARE_BYTES && large(value)) expect(split).toBeDefined()
    }),
    { numRuns: 3000 }
  )
})
