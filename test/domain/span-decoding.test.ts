import { describe, expect, test } from "bun:test"
import { Arbitrary, Either, FastCheck as fc, Schema } from "effect"
import { Span, spanWireOf } from "#src/domain/Span"
import { decodeRewrittenSpan, decodeSpanFast, rewrittenSpanJson } from "#src/domain/SpanDecoding"

const encodedSpan = Arbitrary.make(Span).map((span) => JSON.parse(JSON.stringify(Schema.encodeSync(Span)(span))))

const FIELDS = [
  "id",
  "parent_id",
  "span_type",
  "name",
  "model",
  "input",
  "output",
  "input_tokens",
  "output_tokens",
  "cost",
  "duration_ms",
  "metadata",
  "agent_id",
  "parent_agent_id",
  "agent_role",
  "started_at",
  "ended_at",
  "error",
  "extra"
] as const

/** Values for a field: anything JSON, and the edges of every field's rules. */
const anyValue = fc.oneof(
  fc.jsonValue(),
  fc.constantFrom(
    null,
    undefined,
    -1,
    1.5,
    1e13,
    1e16,
    "",
    "x".repeat(501),
    "a\u0000b",
    "\ud800",
    "2026-01-01",
    "2026-01-01T00:00:00",
    "0099-01-01T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "Jan 1 2026",
    "not-a-uuid",
    [],
    {},
    "llm_call",
    "thinking"
  )
)

/** A valid span with one field replaced by something arbitrary (often invalid). */
const mutatedSpan = fc
  .tuple(
    encodedSpan,
    fc.constantFrom(...FIELDS),
    anyValue.filter((v) => v !== undefined)
  )
  .map(([span, key, value]) => ({ ...span, [key]: value }))

const decodeSlow = Schema.decodeUnknownEither(Span)

describe("decodeSpanFast", () => {
  test("accepts only what Span accepts, and decodes it to the same value", () => {
    fc.assert(
      fc.property(fc.oneof(encodedSpan, mutatedSpan, fc.jsonValue()), (input) => {
        const fast = decodeSpanFast(input)
        if (fast === undefined) return
        const slow = decodeSlow(input)
        expect(Either.isRight(slow)).toBe(true)
        expect(Schema.encodeSync(Span)(fast)).toEqual(Schema.encodeSync(Span)(Either.getOrThrow(slow)))
      }),
      { numRuns: 2000 }
    )
  })

  test("takes the fast path for valid spans (the point of it)", () => {
    const samples = fc.sample(encodedSpan, 500)
    const fast = samples.filter((s) => decodeSpanFast(s) !== undefined).length
    expect(fast).toBe(samples.length)
  })
})

const decodeSync = Schema.decodeUnknownSync(Span)

/** What a processor returns for a decoded span (given its JSON form): the same span, or rewritten, often invalidly. */
const rewrite = fc.oneof(
  // returned as given
  fc.constant((wire: Record<string, unknown>) => wire),
  // one field replaced, or removed
  fc.tuple(fc.constantFrom(...FIELDS), anyValue).map(([key, value]) => (wire: Record<string, unknown>) => ({
    ...wire,
    [key]: value
  })),
  fc.constantFrom(...FIELDS).map((key) => (wire: Record<string, unknown>) => {
    const { [key]: _, ...rest } = wire
    return rest
  }),
  // a field changed in place on the object the processor was given
  fc.tuple(fc.constantFrom(...FIELDS), anyValue).map(
    ([key, value]) =>
      (wire: Record<string, unknown>) =>
        Object.assign(wire, { [key]: value })
  ),
  // a payload changed in place: the object is the one the decoded span holds, its content is not
  fc
    .tuple(
      fc.constantFrom("input", "output", "metadata"),
      fc.constantFrom("\ud800", "a\u0000", Number.POSITIVE_INFINITY, "ok")
    )
    .map(([key, value]) => (wire: Record<string, unknown>) => {
      const payload = wire[key]
      if (payload !== null && typeof payload === "object") (payload as Record<string, unknown>).k = value
      return wire
    }),
  // every text the user may have typed rewritten, as a redactor does (some rewrites are not storable)
  fc.constantFrom("[masked]", "\ud800", "x".repeat(600)).map((mask) => (wire: Record<string, unknown>) => {
    const masked = (v: unknown): unknown =>
      typeof v === "string"
        ? v.replace(/[a-z]+/g, mask)
        : Array.isArray(v)
          ? v.map(masked)
          : v !== null && typeof v === "object"
            ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, masked(x)]))
            : v
    return Object.fromEntries(
      Object.entries(wire).map(([k, v]) => [
        k,
        ["id", "parent_id", "span_type", "started_at", "ended_at"].includes(k) ? v : masked(v)
      ])
    )
  })
)

/** A span as decoded from a request (its payloads with objects in them, so rewrites in place can reach them). */
const decodedSpan = encodedSpan.chain((span) =>
  fc
    .record({
      input: fc.option(fc.jsonValue(), { nil: undefined }),
      metadata: fc.dictionary(fc.string(), fc.jsonValue())
    })
    .map(({ input, metadata }) => ({ ...span, input: { messages: [{ content: "hello", input }] }, metadata }))
    .filter((s) => Either.isRight(decodeSlow(s)))
    .map((s) => decodeSync(s))
)

describe("decodeRewrittenSpan", () => {
  test("accepts only what Span accepts, and decodes it to the same value", () => {
    fc.assert(
      fc.property(fc.oneof(encodedSpan.map(decodeSync), decodedSpan), rewrite, (before, f) => {
        const after = f(spanWireOf(before) as Record<string, unknown>)
        const fast = decodeRewrittenSpan(before, after)
        if (fast === undefined) return
        const slow = decodeSlow(after)
        expect(Either.isRight(slow)).toBe(true)
        expect(Schema.encodeSync(Span)(fast)).toEqual(Schema.encodeSync(Span)(Either.getOrThrow(slow)))
      }),
      { numRuns: 3000 }
    )
  })

  test("refuses a payload made unstorable in place, though it is the decoded span's own object", () => {
    const before = decodeSync({
      id: crypto.randomUUID(),
      parent_id: null,
      span_type: "llm_call",
      name: "n",
      input: { messages: [{ content: "hello" }] },
      started_at: "2026-01-01T00:00:00.000Z"
    })
    const wire = spanWireOf(before) as Record<string, unknown>
    ;(wire.input as { messages: Array<{ content: string }> }).messages[0]!.content = "\ud800"
    expect(wire.input).toBe(before.input)
    expect(decodeRewrittenSpan(before, wire)).toBeUndefined()
    expect(Either.isLeft(decodeSlow(wire))).toBe(true)
  })

  test("takes the fast path for what a span processor usually returns: the span, or its texts rewritten", () => {
    const mask = (v: unknown): unknown =>
      typeof v === "string"
        ? v.replace(/[a-z]/g, "*")
        : Array.isArray(v)
          ? v.map(mask)
          : v !== null && typeof v === "object"
            ? Object.fromEntries(Object.entries(v).map(([k, x]) => [mask(k) as string, mask(x)]))
            : v
    const kept = new Set(["id", "parent_id", "span_type", "started_at", "ended_at"])
    const samples = fc.sample(decodedSpan, 300)
    for (const before of samples) {
      const wire = spanWireOf(before) as Record<string, unknown>
      expect(decodeRewrittenSpan(before, wire)).toBeDefined()
      const masked = Object.fromEntries(Object.entries(wire).map(([k, v]) => [k, kept.has(k) ? v : mask(v)]))
      expect(decodeRewrittenSpan(before, masked)).toBeDefined()
    }
  })
})

describe("rewrittenSpanJson", () => {
  test("accepts only what Span accepts, and gives the same span in JSON", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          encodedSpan,
          decodedSpan.map((s) => spanWireOf(s) as Record<string, unknown>)
        ),
        rewrite,
        (before, f) => {
          // The processor gets a shallow copy, as processSpansJson gives it: nested objects are shared.
          const after = f({ ...before })
          const checked = rewrittenSpanJson(before, after)
          if (checked === undefined) return
          const slow = decodeSlow(after)
          expect(Either.isRight(slow)).toBe(true)
          expect(Schema.encodeSync(Span)(decodeSync(checked))).toEqual(Schema.encodeSync(Span)(Either.getOrThrow(slow)))
        }
      ),
      { numRuns: 3000 }
    )
  })
})
