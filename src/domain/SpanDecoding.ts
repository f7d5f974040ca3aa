import { Arbitrary, DateTime, Effect, ParseResult, Schema } from "effect"
import { instantOf } from "./Instant.ts"
import { isStorableText, MAX_AMOUNT, unstorableReason } from "./Json.ts"
import { MAX_SPAN_COUNT, Span, SPAN_TEXT_LIMITS, SpanType } from "./Span.ts"

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/
const SPAN_TYPES: ReadonlySet<unknown> = new Set(SpanType.literals)

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const text = (u: unknown, max: number) => typeof u === "string" && u.length <= max && isStorableText(u)
const count = (u: unknown) => Number.isInteger(u) && (u as number) >= 0 && (u as number) <= MAX_SPAN_COUNT
const optional = (u: unknown, check: (v: unknown) => boolean) => u === undefined || check(u)

/**
 * The span, decoded, when it is plainly valid; undefined otherwise. It accepts a subset of what `Span`
 * accepts and decodes it to the same value (a property test holds it to that), at a tenth of the cost of
 * the Schema interpreter: 100 spans a request is the hot path of ingestion.
 */
export const decodeSpanFast = (u: unknown): Span | undefined => {
  if (!isObject(u)) return undefined
  const started = typeof u.started_at === "string" ? instantOf(u.started_at) : undefined
  if (started === undefined) return undefined
  let ended: DateTime.Utc | undefined
  if (u.ended_at !== undefined) {
    ended = typeof u.ended_at === "string" ? instantOf(u.ended_at) : undefined
    if (ended === undefined) return undefined
  }
  const valid =
    typeof u.id === "string" &&
    UUID.test(u.id) &&
    (u.parent_id === null || (typeof u.parent_id === "string" && UUID.test(u.parent_id))) &&
    SPAN_TYPES.has(u.span_type) &&
    text(u.name, SPAN_TEXT_LIMITS.name) &&
    optional(u.model, (v) => text(v, SPAN_TEXT_LIMITS.model)) &&
    optional(u.agent_id, (v) => text(v, SPAN_TEXT_LIMITS.agent_id)) &&
    optional(u.parent_agent_id, (v) => text(v, SPAN_TEXT_LIMITS.parent_agent_id)) &&
    optional(u.agent_role, (v) => text(v, SPAN_TEXT_LIMITS.agent_role)) &&
    optional(u.error, (v) => text(v, SPAN_TEXT_LIMITS.error)) &&
    optional(u.input_tokens, count) &&
    optional(u.output_tokens, count) &&
    optional(u.duration_ms, count) &&
    optional(u.cost, (v) => typeof v === "number" && Number.isFinite(v) && v >= 0 && v <= MAX_AMOUNT) &&
    optional(u.input, (v) => unstorableReason(v) === undefined) &&
    optional(u.output, (v) => unstorableReason(v) === undefined) &&
    optional(u.metadata, (v) => isObject(v) && unstorableReason(v) === undefined)
  if (!valid) return undefined
  const span: Record<string, unknown> = { ...u, started_at: started }
  if (ended !== undefined) span.ended_at = ended
  return span as Span
}

const decodeSlow = ParseResult.decodeUnknown(Span)
const encode = ParseResult.encodeUnknown(Span)

/** The decoded side: a span whose dates are already `DateTime`s (cheap guard; `Span` checked the rest). */
const DecodedSpan = Schema.declare((u): u is Span => isObject(u) && DateTime.isDateTime(u.started_at), {
  identifier: "DecodedSpan"
})

/**
 * `Span` as a request payload: the fast path for valid spans, the Schema decoder for everything else (so
 * errors read exactly as the schema words them). Documented in OpenAPI as the `Span` component.
 */
export const SpanPayload = Schema.transformOrFail(Schema.Unknown, DecodedSpan, {
  strict: true,
  decode: (input, options) => {
    const fast = decodeSpanFast(input)
    return fast === undefined ? decodeSlow(input, options) : Effect.succeed(fast)
  },
  encode: (span, options) => encode(span, options)
}).annotations({
  identifier: "SpanPayload",
  jsonSchema: { $ref: "#/components/schemas/Span" },
  arbitrary: () => () => Arbitrary.make(Span)
})

/** `Schema.Array(Span)` items already decoded (a cheap guard on each element). */
const DecodedSpans = Schema.declare(
  (u): u is ReadonlyArray<Span> => Array.isArray(u) && u.every((s) => isObject(s) && DateTime.isDateTime(s.started_at)),
  { identifier: "DecodedSpans" }
)

/**
 * An array of at most `maxItems` spans as a request payload: when every element takes the fast path, one plain
 * loop decodes them all (no Schema interpreter and no Effect per element: that overhead was as large as the
 * checks themselves); otherwise the array schema of `SpanPayload` decodes it, so errors read as they always did.
 * Documented in OpenAPI as an array of `Span`.
 */
export const spanBatchPayload = (maxItems: number) => {
  const slow = Schema.Array(SpanPayload).pipe(Schema.maxItems(maxItems))
  const decodeArray = ParseResult.decodeUnknown(slow)
  const encodeArray = ParseResult.encodeUnknown(slow)
  return Schema.transformOrFail(Schema.Unknown, DecodedSpans, {
    strict: true,
    decode: (input, options) => {
      if (Array.isArray(input) && input.length <= maxItems) {
        const out: Array<Span> = new Array(input.length)
        let i = 0
        for (; i < input.length; i++) {
          const span = decodeSpanFast(input[i])
          if (span === undefined) break
          out[i] = span
        }
        if (i === input.length) return ParseResult.succeed(out)
      }
      return decodeArray(input, options)
    },
    encode: (spans, options) => encodeArray(spans, options)
  }).annotations({
    jsonSchema: { type: "array", items: { $ref: "#/components/schemas/Span" }, maxItems },
    arbitrary: () => () => Arbitrary.make(Schema.Array(Span).pipe(Schema.maxItems(maxItems)))
  })
}
