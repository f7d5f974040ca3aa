import { Arbitrary, DateTime, Effect, ParseResult, Schema } from "effect"
import { formatInstant, instantOf } from "./Instant.ts"
import { isStorableText, MAX_AMOUNT, unstorableReason } from "./Json.ts"
import { MAX_SPAN_COUNT, Span, SPAN_TEXT_LIMITS, SpanType } from "./Span.ts"

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/
const SPAN_TYPES: ReadonlySet<unknown> = new Set(SpanType.literals)

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)
const text = (u: unknown, max: number) => typeof u === "string" && u.length <= max && isStorableText(u)
const count = (u: unknown) => Number.isInteger(u) && (u as number) >= 0 && (u as number) <= MAX_SPAN_COUNT
const optional = (u: unknown, check: (v: unknown) => boolean) => u === undefined || check(u)
const isId = (u: unknown) => typeof u === "string" && UUID.test(u)
const isParentId = (u: unknown) => u === null || isId(u)
const isSpanType = (u: unknown) => SPAN_TYPES.has(u)
const isName = (u: unknown) => text(u, SPAN_TEXT_LIMITS.name)
const isModel = (u: unknown) => text(u, SPAN_TEXT_LIMITS.model)
const isAgentId = (u: unknown) => text(u, SPAN_TEXT_LIMITS.agent_id)
const isParentAgentId = (u: unknown) => text(u, SPAN_TEXT_LIMITS.parent_agent_id)
const isAgentRole = (u: unknown) => text(u, SPAN_TEXT_LIMITS.agent_role)
const isError = (u: unknown) => text(u, SPAN_TEXT_LIMITS.error)
const isCost = (u: unknown) => typeof u === "number" && Number.isFinite(u) && u >= 0 && u <= MAX_AMOUNT
const isJson = (u: unknown) => unstorableReason(u) === undefined
const isJsonObject = (u: unknown) => isObject(u) && unstorableReason(u) === undefined

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
    isId(u.id) &&
    isParentId(u.parent_id) &&
    isSpanType(u.span_type) &&
    isName(u.name) &&
    optional(u.model, isModel) &&
    optional(u.agent_id, isAgentId) &&
    optional(u.parent_agent_id, isParentAgentId) &&
    optional(u.agent_role, isAgentRole) &&
    optional(u.error, isError) &&
    optional(u.input_tokens, count) &&
    optional(u.output_tokens, count) &&
    optional(u.duration_ms, count) &&
    optional(u.cost, isCost) &&
    optional(u.input, isJson) &&
    optional(u.output, isJson) &&
    optional(u.metadata, isJsonObject)
  if (!valid) return undefined
  const span: Record<string, unknown> = { ...u, started_at: started }
  if (ended !== undefined) span.ended_at = ended
  return span as Span
}

/** The check of each named field but the instants, as `decodeSpanFast` applies it (undefined: absent). */
const FIELD_CHECKS: ReadonlyMap<string, (u: unknown) => boolean> = new Map([
  ["id", isId],
  ["parent_id", isParentId],
  ["span_type", isSpanType],
  ["name", isName],
  ["model", (u: unknown) => optional(u, isModel)],
  ["agent_id", (u: unknown) => optional(u, isAgentId)],
  ["parent_agent_id", (u: unknown) => optional(u, isParentAgentId)],
  ["agent_role", (u: unknown) => optional(u, isAgentRole)],
  ["error", (u: unknown) => optional(u, isError)],
  ["input_tokens", (u: unknown) => optional(u, count)],
  ["output_tokens", (u: unknown) => optional(u, count)],
  ["duration_ms", (u: unknown) => optional(u, count)],
  ["cost", (u: unknown) => optional(u, isCost)],
  ["input", (u: unknown) => optional(u, isJson)],
  ["output", (u: unknown) => optional(u, isJson)],
  ["metadata", (u: unknown) => optional(u, isJsonObject)]
])

/** An instant as rewritten: `before`'s own when printed as `before` prints, else parsed (undefined: invalid). */
const rewrittenInstant = (value: unknown, before: DateTime.Utc | undefined) => {
  if (typeof value !== "string") return undefined
  return before !== undefined && value === formatInstant(before) ? before : instantOf(value)
}

/**
 * `after`, the JSON form of the decoded span `before` as a span processor returned it (rewritten or not), decoded
 * when plainly valid; undefined otherwise (then `Span` decodes it, for its verdict and its error). It accepts a
 * subset of what `Span` accepts and decodes it to the same value, like `decodeSpanFast`, but checks again only what
 * differs from `before`: a value that is the same primitive as `before`'s (a kept id, name or model; a text the
 * processor left as it was) passed `Span` already, and an instant printed as `before`'s keeps its decoded value.
 * Objects and arrays (input, output, metadata) are always walked: a processor may have changed them in place.
 */
export const decodeRewrittenSpan = (before: Span, after: unknown): Span | undefined => {
  if (!isObject(after)) return undefined
  // Checked and returned: the copy (its own enumerable properties, each read once), as `Span` would see them.
  const span: Record<string, unknown> = { ...after }
  const started = rewrittenInstant(span.started_at, before.started_at)
  if (started === undefined) return undefined
  let ended: DateTime.Utc | undefined
  if (span.ended_at !== undefined) {
    ended = rewrittenInstant(span.ended_at, before.ended_at)
    if (ended === undefined) return undefined
  }
  if (!changedFieldsValid(before as Record<string, unknown>, span)) return undefined
  span.started_at = started
  if (ended !== undefined) span.ended_at = ended
  return span as Span
}

/** The required fields are there, and every named field but the instants is `before`'s primitive or valid. */
const changedFieldsValid = (before: Record<string, unknown>, span: Record<string, unknown>) => {
  if (!("id" in span && "parent_id" in span && "span_type" in span && "name" in span)) return false
  for (const key in span) {
    const check = FIELD_CHECKS.get(key)
    if (check === undefined) continue
    const value = span[key]
    const kept = value === before[key] && (value === null || typeof value !== "object")
    if (!kept && !check(value)) return false
  }
  return true
}

/** An instant in JSON as rewritten: kept when it is `before`'s text, else printed as `toISOString` does. */
const rewrittenInstantText = (value: unknown, before: unknown) => {
  if (value === before && typeof value === "string") return value
  const instant = typeof value === "string" ? instantOf(value) : undefined
  return instant === undefined ? undefined : formatInstant(instant)
}

/**
 * `decodeRewrittenSpan` for a span kept as JSON (OTLP's mapped spans): `after`, a processor's output for `before`,
 * with the same checks of what changed, its instants as text (a rewritten one printed as `toISOString` prints it);
 * undefined when it is not plainly valid. What the processor did not change is not checked at all (OTLP's mapping
 * made it).
 */
export const rewrittenSpanJson = (
  before: Readonly<Record<string, unknown>>,
  after: unknown
): Record<string, unknown> | undefined => {
  if (!isObject(after)) return undefined
  const span: Record<string, unknown> = { ...after }
  const started = rewrittenInstantText(span.started_at, before.started_at)
  if (started === undefined) return undefined
  let ended: string | undefined
  if (span.ended_at !== undefined) {
    ended = rewrittenInstantText(span.ended_at, before.ended_at)
    if (ended === undefined) return undefined
  }
  if (!changedFieldsValid(before, span)) return undefined
  span.started_at = started
  if (ended !== undefined) span.ended_at = ended
  return span
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
