import { Schema } from "effect"
import { DecimalDigits, pageParams } from "./Page.ts"
import { ProjectId, TraceId } from "./Ids.ts"
import { Instant } from "./Instant.ts"
import { Amount, Count, JsonObject, JsonValue, Text } from "./Json.ts"
import { Span } from "./Span.ts"
import { spanBatchPayload } from "./SpanDecoding.ts"

export const TraceStatus = Schema.Literal("running", "completed", "failed")
export type TraceStatus = typeof TraceStatus.Type

export const isTerminal = (status: TraceStatus) => status !== "running"

export const MAX_SPANS_PER_REQUEST = 1000

const strict = { parseOptions: { onExcessProperty: "error" } } as const

export const SpanBatch = spanBatchPayload(MAX_SPANS_PER_REQUEST)

/** Body of POST /api/v1/traces (strict: unknown fields are refused). */
export const CreateTraceRequest = Schema.Struct({
  id: TraceId,
  started_at: Instant,
  project_id: Schema.optional(ProjectId),
  name: Schema.optional(Text(500)),
  input: Schema.optional(JsonValue),
  output: Schema.optional(JsonValue),
  status: Schema.optionalWith(TraceStatus, { default: () => "running" as const }),
  total_tokens: Schema.optional(Count),
  total_cost: Schema.optional(Amount),
  total_duration_ms: Schema.optional(Count),
  metadata: Schema.optional(JsonObject),
  session_id: Schema.optional(Text(100)),
  lossy: Schema.optional(Schema.Boolean),
  terminated_early: Schema.optional(Schema.Boolean),
  ended_at: Schema.optional(Instant),
  spans: Schema.optionalWith(SpanBatch, { default: () => [] })
}).annotations({ identifier: "CreateTraceRequest", ...strict })
export type CreateTraceRequest = typeof CreateTraceRequest.Type

/** Body of PATCH /api/v1/traces/{traceId} (strict, every field optional). */
export const FinishTraceRequest = Schema.Struct({
  status: Schema.optional(TraceStatus),
  output: Schema.optional(JsonValue),
  ended_at: Schema.optional(Instant),
  total_tokens: Schema.optional(Count),
  total_cost: Schema.optional(Amount),
  total_duration_ms: Schema.optional(Count),
  lossy: Schema.optional(Schema.Boolean),
  terminated_early: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "FinishTraceRequest", ...strict })
export type FinishTraceRequest = typeof FinishTraceRequest.Type

/** Body of POST /api/v1/traces/{traceId}/spans: spans streamed into a running trace. */
export const AppendSpansRequest = Schema.Struct({
  spans: SpanBatch
}).annotations({ identifier: "AppendSpansRequest", ...strict })
export type AppendSpansRequest = typeof AppendSpansRequest.Type

export const TraceCreateResult = Schema.Struct({
  id: TraceId,
  status: Schema.Literal("created", "resumed", "updated"),
  jobId: Schema.optional(Schema.UUID).annotations({
    description: "The downstream processing job enqueued when this request made the trace terminal"
  })
}).annotations({ identifier: "TraceCreateResult" })
export type TraceCreateResult = typeof TraceCreateResult.Type

export const AppendSpansResult = Schema.Struct({
  id: TraceId,
  spans_written: Count,
  spanCount: Count
}).annotations({ identifier: "AppendSpansResult" })

/** A trace in responses (camelCase). */
export const Trace = Schema.Struct({
  id: TraceId,
  projectId: Schema.optional(Schema.NullOr(ProjectId)),
  name: Schema.optional(Schema.NullOr(Schema.String)),
  status: TraceStatus,
  input: Schema.optional(Schema.Unknown),
  output: Schema.optional(Schema.Unknown),
  totalTokens: Schema.optional(Schema.Int),
  totalCost: Schema.optional(Schema.String),
  totalDurationMs: Schema.optional(Schema.Int),
  spanCount: Schema.optional(Schema.Int),
  sessionId: Schema.optional(Schema.NullOr(Schema.String)),
  startedAt: Instant,
  endedAt: Schema.optional(Schema.NullOr(Instant)),
  metadata: Schema.optional(Schema.Unknown),
  lossy: Schema.optional(Schema.Boolean),
  terminatedEarly: Schema.optional(Schema.Boolean),
  environment: Schema.optional(Schema.Literal("production", "sandbox")),
  otelTraceId: Schema.optional(Schema.String).annotations({
    description: "The OpenTelemetry trace id (32 hex digits) of a trace received over OTLP; GET /api/v1/traces/{id} accepts it too"
  })
}).annotations({ identifier: "Trace" })
export type Trace = typeof Trace.Type
/** A trace as JSON: ISO date-time strings. */
export type TraceWire = typeof Trace.Encoded

export const TraceDetail = Schema.Struct({
  ...Trace.fields,
  spans: Schema.Array(Span),
  causalOrder: Schema.Array(Schema.UUID),
  concurrentGroups: Schema.Array(Schema.Array(Schema.UUID))
}).annotations({ identifier: "TraceDetail" })
export type TraceDetail = typeof TraceDetail.Type
export type TraceDetailWire = typeof TraceDetail.Encoded

export const TraceList = Schema.Struct({
  items: Schema.Array(Trace),
  total: Schema.Int,
  limit: Schema.Int,
  offset: Schema.Int,
  hasMore: Schema.Boolean,
  nextCursor: Schema.optional(Schema.String)
}).annotations({ identifier: "TraceList" })
export type TraceList = typeof TraceList.Type
export type TraceListWire = typeof TraceList.Encoded

/** Where a trace was recorded: `sandbox` for fork replays and traces sent with `metadata.environment = "sandbox"`. */
export const TraceEnvironment = Schema.Literal("production", "sandbox")
export type TraceEnvironment = typeof TraceEnvironment.Type

/** `total` of a listing: counted exactly, or counted up to TOTAL_CAP + 1 (`capped`). */
export const TotalMode = Schema.Literal("exact", "capped")
export type TotalMode = typeof TotalMode.Type

/** With `total=capped`, matches are counted up to one more than this: a total above it means "more than TOTAL_CAP". */
export const TOTAL_CAP = 1_000

/**
 * A query parameter decoded from its text, described on the text itself: the OpenAPI document shows a parameter's
 * encoded side, where an annotation on the decoded schema would not appear.
 */
const described = <A, R>(schema: Schema.Schema<A, string, R>, description: string) =>
  Schema.String.annotations({ description }).pipe(Schema.compose(schema))

/** A decimal number as plain digits with an optional fraction (`12`, `0.5`): no sign, exponent, hex or spaces. */
const PlainDecimal = Schema.String.pipe(
  Schema.pattern(/^[0-9]{1,16}(\.[0-9]{1,16})?$/, { message: () => "must be a number written in plain decimal digits" })
)
const NonNegativeFromString = Schema.compose(PlainDecimal, Schema.NumberFromString).pipe(Schema.finite(), Schema.nonNegative())
const NonNegativeIntFromString = Schema.compose(DecimalDigits, Schema.NumberFromString).pipe(Schema.int(), Schema.nonNegative())

// No identifier: an identified URL-params schema becomes a $ref that the OpenAPI generator drops.
export const ListTracesParams = Schema.Struct({
  ...pageParams,
  env: Schema.optional((Schema.Literal("sandbox")).annotations({
    description: "`sandbox` lists sandbox traces; without it (and without `environment`) production traces are listed"
  })),
  environment: Schema.optional(TraceEnvironment.annotations({
    description: "Traces of this environment (default production); must agree with `env` when both are given"
  })),
  cursor: Schema.optional((Schema.String.pipe(Schema.maxLength(200))).annotations({
    description: "The `nextCursor` of the previous page: the page after it, at the same cost however deep"
  })),
  status: Schema.optional(TraceStatus.annotations({ description: "Traces in this status" })),
  project_id: Schema.optional(ProjectId.annotations({ description: "Traces of this project" })),
  session_id: Schema.optional((Text(100).pipe(Schema.minLength(1))).annotations({ description: "Traces of this session" })),
  name: Schema.optional((Text(500).pipe(Schema.minLength(1))).annotations({
    description: "Traces whose name contains this text, ignoring case"
  })),
  model: Schema.optional((Text(100).pipe(Schema.minLength(1))).annotations({
    description: "Traces with at least one span of this model (exact name)"
  })),
  has_error: Schema.optional(Schema.BooleanFromString.annotations({
    description: "`true`: traces that failed or have a span that recorded an error; `false`: the others"
  })),
  date_from: Schema.optional(described(Instant, "Traces that started at or after this instant (ISO 8601)")),
  date_to: Schema.optional(described(Instant, "Traces that started at or before this instant (ISO 8601)")),
  min_cost: Schema.optional(described(NonNegativeFromString, "Traces whose total cost is at least this (USD)")),
  min_duration_ms: Schema.optional(
    described(NonNegativeIntFromString, "Traces whose total duration is at least this many milliseconds")
  ),
  total: Schema.optionalWith(TotalMode.annotations({
    description: `\`exact\` (default) counts every match; \`capped\` counts up to ${TOTAL_CAP + 1}, so a total of ${
      TOTAL_CAP + 1
    } means "more than ${TOTAL_CAP}" (a large account's first page answers sooner)`
  }), { default: () => "exact" as const })
}).pipe(
  Schema.filter((p) =>
    p.env === "sandbox" && p.environment === "production"
      ? { path: ["environment"], message: "contradicts env=sandbox" }
      : p.date_from !== undefined && p.date_to !== undefined && p.date_from.epochMillis > p.date_to.epochMillis
      ? { path: ["date_to"], message: "is before date_from" }
      : undefined
  )
).annotations(strict)
export type ListTracesParams = typeof ListTracesParams.Type

export const TracePath = Schema.Struct({ traceId: TraceId })

/** An OpenTelemetry trace id: 32 hex digits, any case (W3C trace context). */
export const OtelTraceId = Schema.String.pipe(
  Schema.pattern(/^[0-9a-fA-F]{32}$/),
  Schema.brand("OtelTraceId")
).annotations({ description: "An OpenTelemetry trace id: 32 hex digits" })
export type OtelTraceId = typeof OtelTraceId.Type

/** The path of GET /api/v1/traces/{traceId}: our trace id, or the OpenTelemetry trace id a trace was received with. */
export const TraceLookupPath = Schema.Struct({
  traceId: Schema.Union(TraceId, OtelTraceId).annotations({
    description: "The trace's id (a UUID), or the OpenTelemetry trace id (32 hex digits) it was received with over OTLP"
  })
})

export const DeleteResult = Schema.Struct({ deleted: Schema.Literal(true) }).annotations({ identifier: "DeleteResult" })

export class TraceNotFound extends Schema.TaggedError<TraceNotFound>()("TraceNotFound", { traceId: TraceId }) {}
export class TraceIdTaken extends Schema.TaggedError<TraceIdTaken>()("TraceIdTaken", { traceId: TraceId }) {}
/** Spans are only added to a running trace: a finished one has already been handed to downstream processing. */
export class TraceNotRunning extends Schema.TaggedError<TraceNotRunning>()("TraceNotRunning", {
  traceId: TraceId,
  status: TraceStatus
}) {}
/** A batch of spans the trace cannot take (duplicate ids, dangling parents, unstorable values). */
export class SpansRejected extends Schema.TaggedError<SpansRejected>()("SpansRejected", { reason: Schema.String }) {}
