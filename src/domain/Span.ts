import { Schema } from "effect"
import { SpanId } from "./Ids.ts"
import { Instant } from "./Instant.ts"
import { Amount, JsonObject, JsonValue, SpanCount, Text } from "./Json.ts"

export { MAX_SPAN_COUNT } from "./Json.ts"

export const SpanType = Schema.Literal(
  "llm_call", "tool_call", "tool_result", "reasoning", "action", "error", "fork_point"
)
export type SpanType = typeof SpanType.Type

/** Longest text of each string field of a span. */
export const SPAN_TEXT_LIMITS = {
  name: 500,
  model: 100,
  agent_id: 500,
  parent_agent_id: 500,
  agent_role: 500,
  error: 100_000
} as const

export const spanFields = {
  id: SpanId,
  parent_id: Schema.NullOr(SpanId),
  span_type: SpanType,
  name: Text(SPAN_TEXT_LIMITS.name),
  model: Schema.optional(Text(SPAN_TEXT_LIMITS.model)),
  input: Schema.optional(JsonValue),
  output: Schema.optional(JsonValue),
  input_tokens: Schema.optional(SpanCount),
  output_tokens: Schema.optional(SpanCount),
  cost: Schema.optional(Amount),
  duration_ms: Schema.optional(SpanCount),
  metadata: Schema.optional(JsonObject),
  agent_id: Schema.optional(Text(SPAN_TEXT_LIMITS.agent_id)),
  parent_agent_id: Schema.optional(Text(SPAN_TEXT_LIMITS.parent_agent_id)),
  agent_role: Schema.optional(Text(SPAN_TEXT_LIMITS.agent_role)),
  started_at: Instant,
  ended_at: Schema.optional(Instant),
  error: Schema.optional(Text(SPAN_TEXT_LIMITS.error))
}

export const SPAN_FIELD_NAMES: ReadonlySet<string> = new Set(Object.keys(spanFields))

/**
 * A span on the wire (snake_case). Additional properties are allowed: they are kept,
 * stored and returned as sent. (An index signature keeps them at a third of the decoding cost of
 * `onExcessProperty: "preserve"`.)
 */
export const Span = Schema.Struct(spanFields, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
  identifier: "Span"
})
export type Span = typeof Span.Type
/** A span as JSON: ISO date-time strings. */
export type SpanWire = typeof Span.Encoded

/** The fields of a span that are not among its named ones. */
export const extraFields = (span: object): Record<string, unknown> | undefined => {
  let extra: Record<string, unknown> | undefined
  for (const key in span) {
    if (SPAN_FIELD_NAMES.has(key)) continue
    const value = (span as Record<string, unknown>)[key]
    // defineProperty, not assignment: an extra named "__proto__" is data, not a prototype.
    Object.defineProperty((extra ??= {}), key, { value, enumerable: true, writable: true, configurable: true })
  }
  return extra
}
