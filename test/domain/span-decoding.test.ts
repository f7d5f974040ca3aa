import { describe, expect, test } from "bun:test"
import { Arbitrary, Either, FastCheck as fc, Schema } from "effect"
import { Span } from "#src/domain/Span"
import { decodeSpanFast } from "#src/domain/SpanDecoding"

const encodedSpan = Arbitrary.make(Span).map((span) => JSON.parse(JSON.stringify(Schema.encodeSync(Span)(span))))

/** A valid span with one field replaced by something arbitrary (often invalid). */
const mutatedSpan = fc
  .tuple(
    encodedSpan,
    fc.constantFrom(
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
    ),
    fc.oneof(
      fc.jsonValue(),
      fc.constantFrom(
        null,
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
