import { Schema } from "effect"
import { SpanId } from "./Ids.ts"
import { Instant } from "./Instant.ts"
import { Amount, JsonObject, JsonValue, SpanCount, Text } from "./Json.ts"

export const SpanType = Schema.Literal(
  "llm_call", "tool_call", "tool_result", "reasoning", "action", "error", "fork_point"
)
export type SpanType = typeof SpanType.Type

export const spanFields = {
  id: SpanId,
  parent_id: Schema.NullOr(SpanId),
  span_type: SpanType,
  name: Text(500),
  model: Schema.optional(Text(100)),
  input: Schema.optional(JsonValue),
  output: Schema.optional(JsonValue),
  input_tokens: Schema.optional(SpanCount),
  output_tokens: Schema.optional(SpanCount),
  cost: Schema.optional(Amount),
  duration_ms: Schema.optional(SpanCount),
  metadata: Schema.optional(JsonObject),
  agent_id: Schema.optional(Text(500)),
  parent_agent_id: Schema.optional(Text(500)),
  agent_role: Schema.optional(Text(500)),
  started_at: Instant,
  ended_at: Schema.optional(Instant),
  error: Schema.optional(Text(100_000))
}

export const SPAN_FIELD_NAMES: ReadonlySet<string> = new Set(Object.keys(spanFields))

/**
 * A span on the wire (snake_case). Additional properties are allowed by the spec: they are kept,
 * stored and returned as sent. (An index signature keeps them at a third of the decoding cost of
 * `onExcessProperty: "preserve"`.)
 */
export const Span = Schema.Struct(spanFields, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
  identifier: "Span"
})
export type Span = typeof Span.Type
/** A span as JSON: ISO date-time strings. */
export type SpanWire = typeof Span.Encoded

/** The fields of a span that are not among the spec's named ones. */
export const extraFields = (span: object): Record<string, unknown> | undefined => {
  let extra: Record<string, unknown> | undefined
  for (const [key, value] of Object.entries(span)) {
    if (SPAN_FIELD_NAMES.has(key)) continue
    ;(extra ??= {})[key] = value
  }
  return extra
}
