import { Schema } from "effect"
import { SpanId } from "./Ids.ts"
import { formatInstant, Instant } from "./Instant.ts"
import { Amount, JsonObject, JsonValue, SpanCount, Text } from "./Json.ts"

export { MAX_SPAN_COUNT } from "./Json.ts"

export const SpanType = Schema.Literal(
  "llm_call",
  "tool_call",
  "tool_result",
  "reasoning",
  "action",
  "error",
  "fork_point"
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

/** `Schema.optional` with the field's description, for the API reference. */
const described = <S extends Schema.Schema.All>(schema: S, description: string) =>
  Schema.optional(schema).annotations({ description })
const required = <S extends Schema.Schema.All>(schema: S, description: string) =>
  Schema.propertySignature(schema).annotations({ description })

export const spanFields = {
  id: required(
    SpanId,
    "The span's id (a UUID you choose), unique within its trace; sending it again replaces the span"
  ),
  parent_id: required(Schema.NullOr(SpanId), "The enclosing span of the same trace, or null for a top-level span"),
  span_type: required(
    SpanType,
    "What the step was: a model call, a tool call or its result, reasoning, an action, an error, or a fork point"
  ),
  name: required(Text(SPAN_TEXT_LIMITS.name), "A short label: the tool's or step's name, at most 500 characters"),
  model: described(
    Text(SPAN_TEXT_LIMITS.model),
    "The model called (e.g. gpt-4o-mini, claude-3-5-sonnet-20241022); with token counts and no cost, the cost is estimated from it"
  ),
  input: described(JsonValue, "What the step received: messages, tool arguments, any JSON value"),
  output: described(JsonValue, "What the step produced: a completion, a tool result, any JSON value"),
  input_tokens: described(SpanCount, "Prompt tokens of a model call"),
  output_tokens: described(SpanCount, "Completion tokens of a model call"),
  cost: described(
    Amount,
    "Cost in USD as you computed it; kept as sent. Omitted, it is estimated from model and tokens (see cost_estimated)"
  ),
  duration_ms: described(SpanCount, "How long the step took, in milliseconds"),
  metadata: described(JsonObject, "Free-form attributes of the span"),
  agent_id: described(Text(SPAN_TEXT_LIMITS.agent_id), "The agent that ran the step, in multi-agent systems"),
  parent_agent_id: described(Text(SPAN_TEXT_LIMITS.parent_agent_id), "The agent that delegated to agent_id"),
  agent_role: described(Text(SPAN_TEXT_LIMITS.agent_role), "The agent's role (e.g. planner, researcher)"),
  started_at: required(Instant, "When the step started (ISO 8601)"),
  ended_at: described(Instant, "When the step ended (ISO 8601)"),
  error: described(Text(SPAN_TEXT_LIMITS.error), "The error message, when the step failed")
}

export const SPAN_FIELD_NAMES: ReadonlySet<string> = new Set(Object.keys(spanFields))

/**
 * A span on the wire (snake_case). Additional properties are allowed: they are kept,
 * stored and returned as sent. (An index signature keeps them at a third of the decoding cost of
 * `onExcessProperty: "preserve"`.)
 */
export const Span = Schema.Struct(spanFields, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations(
  {
    identifier: "Span",
    description:
      "One step of a trace. Additional properties are kept and returned as sent. A span stored without a " +
      "cost but with a model and token counts carries `cost_estimated: true` beside the cost Tapedeck estimated " +
      "from its price table."
  }
)
export type Span = typeof Span.Type
/** A span as JSON: ISO date-time strings. */
export type SpanWire = typeof Span.Encoded

/**
 * A decoded span in its JSON form: Span's encoding, without walking every value again (only the instants differ
 * between the two forms; test/domain/span-wire.test.ts checks it against the schema's encoding).
 */
export const spanWireOf = (span: typeof Span.Type): SpanWire => {
  const wire: Record<string, unknown> = { ...span, started_at: formatInstant(span.started_at) }
  if (span.ended_at !== undefined) wire.ended_at = formatInstant(span.ended_at)
  return wire as SpanWire
}

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
