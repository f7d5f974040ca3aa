import { Schema } from "effect"
import { ProjectId, TraceId } from "./Ids.ts"
import { SpanType } from "./Span.ts"

/** What happened to a span or a trace in one write. */
export const StreamEventKind = Schema.Literal("created", "updated", "terminal", "deleted")
export type StreamEventKind = typeof StreamEventKind.Type

/** Compact span event codes as stored in `stream_events.groups`. */
export type SpanEventCode = "c" | "u" | "t"

/**
 * The changes of one trace in one write transaction, in delivery order: the trace event that comes first
 * (`created`), the span events, then the trace event that comes last (`updated`, `terminal` or `deleted`).
 */
export interface StreamGroup {
  /** trace id */
  readonly t: string
  /** trace event before the spans */
  readonly b?: "created"
  /** span events: [span id, code] */
  readonly s: ReadonlyArray<readonly [string, SpanEventCode]>
  /** trace event after the spans */
  readonly a?: "updated" | "terminal" | "deleted"
}

/**
 * A group as `stream_events.groups` stores it: its span events in one string, each a span id's 16 bytes in base64url
 * (22 characters) then its code, 23 characters an event where `["<uuid>","c"]` took about 50 bytes of jsonb. Rows
 * written with `s` as pairs read the same (`readStoredGroup`).
 */
export interface StoredStreamGroup extends Omit<StreamGroup, "s"> {
  readonly s: string | StreamGroup["s"]
}

const ID_CHARS = 22
const EVENT_CHARS = ID_CHARS + 1

export const storedGroup = (group: StreamGroup): StoredStreamGroup => {
  let s = ""
  for (const [spanId, code] of group.s) s += Buffer.from(spanId.replaceAll("-", ""), "hex").toString("base64url") + code
  return { ...group, s }
}

const uuidText = (id: string) => {
  const hex = Buffer.from(id, "base64url").toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

export const readStoredGroup = (group: StoredStreamGroup): StreamGroup => {
  if (typeof group.s !== "string") return group as StreamGroup
  const events: Array<readonly [string, SpanEventCode]> = []
  for (let i = 0; i + EVENT_CHARS <= group.s.length; i += EVENT_CHARS)
    events.push([uuidText(group.s.slice(i, i + ID_CHARS)), group.s[i + ID_CHARS] as SpanEventCode])
  return { ...group, s: events }
}

/** Events of one group: its position-ordered list (trace before, spans, trace after). */
export const groupEventCount = (group: StreamGroup) => group.s.length + (group.b ? 1 : 0) + (group.a ? 1 : 0)

/** Event ids are `row id × EVENT_ID_STRIDE + position in the row`: increasing, exact, resumable. */
export const EVENT_ID_STRIDE = 8192
/** Most events one stream_events row may hold (a write with more is split over several rows). */
export const MAX_EVENTS_PER_ROW = EVENT_ID_STRIDE - 1

export const spanCode = (kind: SpanEventCode): StreamEventKind =>
  kind === "c" ? "created" : kind === "u" ? "updated" : "terminal"

/** A span written again: `terminal` when it now carries an end time, else `updated`. */
export const rewrittenSpanCode = (span: { readonly ended_at?: unknown }): SpanEventCode =>
  span.ended_at === undefined ? "u" : "t"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** Subscription filters (strict); every given filter must match. */
export const StreamFilters = Schema.Struct({
  trace_id: Schema.optional(TraceId),
  project_id: Schema.optional(ProjectId),
  span_type: Schema.optional(SpanType),
  session_id: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)))
}).annotations({ identifier: "StreamFilters", ...strict })
export type StreamFilters = typeof StreamFilters.Type

/** A non-negative safe integer event id, from JSON or a query parameter. */
export const EventIdParam = Schema.NonNegativeInt.pipe(Schema.lessThanOrEqualTo(Number.MAX_SAFE_INTEGER))

export const AuthMessage = Schema.Struct({
  type: Schema.Literal("auth"),
  token: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(8192))
}).annotations(strict)

export const SubscribeMessage = Schema.Struct({
  type: Schema.Literal("subscribe"),
  filters: Schema.optionalWith(StreamFilters, { default: () => ({}) }),
  last_event_id: Schema.optional(EventIdParam),
  /** Events come as `{"type":"batch","count":n,"events":[…]}` frames, one per write batch, instead of a frame each. */
  batch: Schema.optional(Schema.Boolean)
}).annotations(strict)

export const UnsubscribeMessage = Schema.Struct({ type: Schema.Literal("unsubscribe") }).annotations(strict)
export const PingMessage = Schema.Struct({ type: Schema.Literal("ping") }).annotations(strict)
export const PongMessage = Schema.Struct({ type: Schema.Literal("pong") }).annotations(strict)

/** Every message a stream client may send (JSON text frames). */
export const StreamClientMessage = Schema.Union(
  AuthMessage,
  SubscribeMessage,
  UnsubscribeMessage,
  PingMessage,
  PongMessage
)
export type StreamClientMessage = typeof StreamClientMessage.Type

/** Close codes of the stream socket. */
export const StreamCloseCode = {
  /** normal closure (the server is stopping) */
  normal: 1000,
  /** the client fell more than the queue bound behind */
  slowConsumer: 4008,
  /** missing, invalid or late credentials */
  unauthorized: 4401
} as const
