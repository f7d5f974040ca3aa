import { Schema } from "effect"
import { DecimalDigits, pageParams } from "./Page.ts"
import { ProjectId, TraceId } from "./Ids.ts"
import { Instant } from "./Instant.ts"
import { Amount, Count, JsonObject, JsonValue, Text } from "./Json.ts"
import { Span } from "./Span.ts"
import { spanBatchPayload } from "./SpanDecoding.ts"
import { withExamples } from "./Examples.ts"
import { optional, required } from "./Described.ts"

export const TraceStatus = Schema.Literal("running", "completed", "failed")
export type TraceStatus = typeof TraceStatus.Type

export const isTerminal = (status: TraceStatus) => status !== "running"

export const MAX_SPANS_PER_REQUEST = 1000

const strict = { parseOptions: { onExcessProperty: "error" } } as const

export const SpanBatch = spanBatchPayload(MAX_SPANS_PER_REQUEST)

/**
 * A boolean with its description in the JSON Schema itself: this struct has defaults, so the reference shows its
 * encoded side, where a property's own description is dropped (a `description` annotation would change the
 * validation message instead).
 */
const DescribedBoolean = (description: string) =>
  Schema.Boolean.annotations({ jsonSchema: { type: "boolean", description } })

/** Body of POST /api/v1/traces (strict: unknown fields are refused). */
export const CreateTraceRequest = withExamples(
  Schema.Struct({
    id: required(TraceId, "The trace's id, a UUID you choose (the SDK makes one); used again, it is a 409"),
    started_at: required(Instant, "When the run started (ISO 8601)"),
    project_id: optional(ProjectId, "Groups traces by project (a UUID of your choosing)"),
    name: optional(Text(500), "What ran: the agent's or workflow's name, at most 500 characters"),
    input: optional(JsonValue, "The run's input: any JSON value"),
    output: optional(JsonValue, "The run's output: any JSON value"),
    status: Schema.optionalWith(TraceStatus, { default: () => "running" as const }).annotations({
      description: "running (more spans will come), completed or failed; default running"
    }),
    total_tokens: optional(Count, "Tokens of the run; omitted, the spans' sum"),
    total_cost: optional(Amount, "Cost in USD of the run; omitted, the spans' sum (estimated costs included)"),
    total_duration_ms: optional(Count, "Duration in milliseconds; omitted, from the spans' times"),
    metadata: optional(JsonObject, "Free-form attributes (user id, version, tags)"),
    session_id: optional(Text(100), "Groups the traces of one conversation or user session"),
    lossy: optional(
      DescribedBoolean("The recorder dropped some spans (a full queue)"),
      "The recorder dropped some spans (a full queue)"
    ),
    terminated_early: optional(
      DescribedBoolean("The run was stopped before it finished (a guardrail, a timeout)"),
      "The run was stopped before it finished (a guardrail, a timeout)"
    ),
    ended_at: optional(Instant, "When the run ended (ISO 8601)"),
    spans: Schema.optionalWith(SpanBatch, { default: () => [] }).annotations({
      description: "The run's spans, at most 1000; more can be added while it runs"
    })
  }).annotations({ identifier: "CreateTraceRequest", ...strict }),
  {
    id: "7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10",
    name: "book-flight",
    started_at: "2026-06-01T09:30:00.000Z",
    input: { question: "Find me a flight from Paris to Lisbon on June 12" },
    session_id: "chat-42",
    metadata: { user_id: "u_1842", agent_version: "1.4.0" },
    spans: [
      {
        id: "0b8f0e5a-1c2d-4e3f-8a9b-0c1d2e3f4a51",
        parent_id: null,
        span_type: "action",
        name: "travel-agent",
        agent_id: "travel-agent",
        started_at: "2026-06-01T09:30:00.000Z"
      },
      {
        id: "0b8f0e5a-1c2d-4e3f-8a9b-0c1d2e3f4a52",
        parent_id: "0b8f0e5a-1c2d-4e3f-8a9b-0c1d2e3f4a51",
        span_type: "llm_call",
        name: "plan",
        model: "gpt-4o-mini",
        input: [{ role: "user", content: "Find me a flight from Paris to Lisbon on June 12" }],
        output: { role: "assistant", content: "Search flights CDG to LIS on 2026-06-12, then book the cheapest." },
        input_tokens: 412,
        output_tokens: 38,
        duration_ms: 820,
        started_at: "2026-06-01T09:30:00.050Z",
        ended_at: "2026-06-01T09:30:00.870Z"
      },
      {
        id: "0b8f0e5a-1c2d-4e3f-8a9b-0c1d2e3f4a53",
        parent_id: "0b8f0e5a-1c2d-4e3f-8a9b-0c1d2e3f4a51",
        span_type: "tool_call",
        name: "search_flights",
        input: { from: "CDG", to: "LIS", date: "2026-06-12" },
        output: [{ flight: "TP1351", price_eur: 149 }],
        duration_ms: 240,
        started_at: "2026-06-01T09:30:00.900Z"
      }
    ]
  }
)
export type CreateTraceRequest = typeof CreateTraceRequest.Type

/** Body of PATCH /api/v1/traces/{traceId} (strict, every field optional). */
export const FinishTraceRequest = withExamples(
  Schema.Struct({
    status: optional(TraceStatus, "completed or failed ends the run; running keeps it open"),
    output: optional(JsonValue, "The run's output: any JSON value"),
    ended_at: optional(Instant, "When the run ended (ISO 8601)"),
    total_tokens: optional(Count, "Tokens of the run, kept as sent instead of the spans' sum"),
    total_cost: optional(Amount, "Cost in USD of the run, kept as sent instead of the spans' sum"),
    total_duration_ms: optional(Count, "Duration in milliseconds, kept as sent"),
    lossy: optional(Schema.Boolean, "The recorder dropped some spans (a full queue)"),
    terminated_early: optional(Schema.Boolean, "The run was stopped before it finished")
  }).annotations({ identifier: "FinishTraceRequest", ...strict }),
  {
    status: "completed",
    output: { answer: "Booked TP1351 on June 12 for 149 EUR", confirmation: "CONF-TP1351" },
    ended_at: "2026-06-01T09:30:04.200Z"
  }
)
export type FinishTraceRequest = typeof FinishTraceRequest.Type

/** Body of POST /api/v1/traces/{traceId}/spans: spans streamed into a running trace. */
export const AppendSpansRequest = withExamples(
  Schema.Struct({
    spans: required(SpanBatch, "1 to 1000 spans to add; a span id sent again replaces that span")
  }).annotations({ identifier: "AppendSpansRequest", ...strict }),
  {
    spans: [
      {
        id: "0b8f0e5a-1c2d-4e3f-8a9b-0c1d2e3f4a54",
        parent_id: "0b8f0e5a-1c2d-4e3f-8a9b-0c1d2e3f4a51",
        span_type: "tool_call",
        name: "book_flight",
        input: { flight: "TP1351" },
        output: { confirmation: "CONF-TP1351" },
        duration_ms: 310,
        started_at: "2026-06-01T09:30:03.100Z"
      }
    ]
  }
)
export type AppendSpansRequest = typeof AppendSpansRequest.Type

export const TraceCreateResult = Schema.Struct({
  id: required(TraceId, "The trace's id"),
  status: required(
    Schema.Literal("created", "resumed", "updated"),
    "created: a new trace; resumed: a fork replay's result trace that already existed; updated: the trace was changed (PATCH)"
  ),
  jobId: optional(Schema.UUID, "The downstream processing job enqueued when this request made the trace terminal")
}).annotations({ identifier: "TraceCreateResult" })
export type TraceCreateResult = typeof TraceCreateResult.Type

export const AppendSpansResult = Schema.Struct({
  id: required(TraceId, "The trace's id"),
  spans_written: required(Count, "How many spans this request wrote (new or replaced)"),
  spanCount: required(Count, "How many spans the trace has now")
}).annotations({ identifier: "AppendSpansResult" })

/** A trace in responses (camelCase). */
export const Trace = Schema.Struct({
  id: required(TraceId, "The trace's id"),
  projectId: optional(Schema.NullOr(ProjectId), "The project it belongs to, or null"),
  name: optional(Schema.NullOr(Schema.String), "What ran: the agent's or workflow's name, or null"),
  status: required(TraceStatus, "running, completed or failed"),
  input: optional(Schema.Unknown, "The run's input, as sent"),
  output: optional(Schema.Unknown, "The run's output, as sent"),
  totalTokens: optional(Schema.Int, "Tokens of the run: as sent, or the spans' sum"),
  totalCost: optional(
    Schema.String,
    "Cost in USD as a decimal string (exact): as sent, or the spans' sum, estimated costs included"
  ),
  totalDurationMs: optional(Schema.Int, "Duration in milliseconds: as sent, or from the spans' times"),
  spanCount: optional(Schema.Int, "How many spans the trace has"),
  sessionId: optional(Schema.NullOr(Schema.String), "The conversation or user session it belongs to, or null"),
  startedAt: required(Instant, "When the run started (ISO 8601)"),
  endedAt: optional(Schema.NullOr(Instant), "When the run ended (ISO 8601), or null while it runs"),
  metadata: optional(
    Schema.Unknown,
    "Free-form attributes, as sent (OTLP traces keep their resource and ids under otel)"
  ),
  lossy: optional(Schema.Boolean, "The recorder dropped some spans"),
  terminatedEarly: optional(Schema.Boolean, "The run was stopped before it finished (a guardrail, a timeout)"),
  environment: optional(
    Schema.Literal("production", "sandbox"),
    "production, or sandbox for fork replays and traces sent with metadata.environment = sandbox"
  ),
  otelTraceId: optional(
    Schema.String,
    "The OpenTelemetry trace id (32 hex digits) of a trace received over OTLP; GET /api/v1/traces/{id} accepts it too"
  )
}).annotations({ identifier: "Trace" })
export type Trace = typeof Trace.Type
/** A trace as JSON: ISO date-time strings. */
export type TraceWire = typeof Trace.Encoded

export const TraceDetail = Schema.Struct({
  ...Trace.fields,
  spans: required(Schema.Array(Span), "The trace's spans, in start order"),
  causalOrder: required(
    Schema.Array(Schema.UUID),
    "Span ids in an order where each span comes after its parent and the steps it followed"
  ),
  concurrentGroups: required(Schema.Array(Schema.Array(Schema.UUID)), "Groups of span ids that ran at the same time")
}).annotations({ identifier: "TraceDetail" })
export type TraceDetail = typeof TraceDetail.Type
export type TraceDetailWire = typeof TraceDetail.Encoded

export const TraceList = Schema.Struct({
  items: required(Schema.Array(Trace), "This page's traces, newest first"),
  total: required(Schema.Int, "How many traces match over all pages (with total=capped, at most 1001: more than 1000)"),
  limit: required(Schema.Int, "The page size asked for"),
  offset: required(Schema.Int, "How many were skipped before this page"),
  hasMore: required(Schema.Boolean, "Another page follows"),
  nextCursor: optional(Schema.String, "Pass as cursor to get the next page (present when hasMore)")
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
const NonNegativeFromString = Schema.compose(PlainDecimal, Schema.NumberFromString).pipe(
  Schema.finite(),
  Schema.nonNegative()
)
const NonNegativeIntFromString = Schema.compose(DecimalDigits, Schema.NumberFromString).pipe(
  Schema.int(),
  Schema.nonNegative()
)

/**
 * A metadata filter: a JSON object the trace's `metadata` must contain (JSON containment, nested objects and arrays
 * included), e.g. `{"environment":"staging"}` or `{"metadata":{"tier":"gold"}}`.
 */
const MetadataFilter = Schema.String.pipe(Schema.maxLength(2000)).pipe(
  Schema.compose(Schema.parseJson(JsonObject)),
  Schema.filter((o) => Object.keys(o).length > 0 || "must name at least one key")
)

// No identifier: an identified URL-params schema becomes a $ref that the OpenAPI generator drops.
export const ListTracesParams = Schema.Struct({
  ...pageParams,
  env: Schema.optional(
    Schema.Literal("sandbox").annotations({
      description: "`sandbox` lists sandbox traces; without it (and without `environment`) production traces are listed"
    })
  ),
  environment: Schema.optional(
    TraceEnvironment.annotations({
      description: "Traces of this environment (default production); must agree with `env` when both are given"
    })
  ),
  cursor: Schema.optional(
    Schema.String.pipe(Schema.maxLength(200)).annotations({
      description: "The `nextCursor` of the previous page: the page after it, at the same cost however deep"
    })
  ),
  status: Schema.optional(TraceStatus.annotations({ description: "Traces in this status" })),
  project_id: Schema.optional(ProjectId.annotations({ description: "Traces of this project" })),
  session_id: Schema.optional(
    Text(100).pipe(Schema.minLength(1)).annotations({ description: "Traces of this session" })
  ),
  name: Schema.optional(
    Text(500).pipe(Schema.minLength(1)).annotations({
      description: "Traces whose name contains this text, ignoring case"
    })
  ),
  model: Schema.optional(
    Text(100).pipe(Schema.minLength(1)).annotations({
      description: "Traces with at least one span of this model (exact name)"
    })
  ),
  has_error: Schema.optional(
    Schema.BooleanFromString.annotations({
      description: "`true`: traces that failed or have a span that recorded an error; `false`: the others"
    })
  ),
  date_from: Schema.optional(described(Instant, "Traces that started at or after this instant (ISO 8601)")),
  date_to: Schema.optional(described(Instant, "Traces that started at or before this instant (ISO 8601)")),
  min_cost: Schema.optional(described(NonNegativeFromString, "Traces whose total cost is at least this (USD)")),
  min_duration_ms: Schema.optional(
    described(NonNegativeIntFromString, "Traces whose total duration is at least this many milliseconds")
  ),
  metadata: Schema.optional(
    described(
      MetadataFilter,
      'Traces whose metadata contains this JSON object (at most 2000 characters), e.g. `{"environment":"staging"}`: every key given, with the value given (objects compared key by key, arrays by their elements)'
    )
  ),
  total: Schema.optionalWith(
    TotalMode.annotations({
      description: `\`exact\` (default) counts every match; \`capped\` counts up to ${TOTAL_CAP + 1}, so a total of ${
        TOTAL_CAP + 1
      } means "more than ${TOTAL_CAP}" (a large account's first page answers sooner)`
    }),
    { default: () => "exact" as const }
  )
})
  .pipe(
    Schema.filter((p) =>
      p.env === "sandbox" && p.environment === "production"
        ? { path: ["environment"], message: "contradicts env=sandbox" }
        : p.date_from !== undefined && p.date_to !== undefined && p.date_from.epochMillis > p.date_to.epochMillis
          ? { path: ["date_to"], message: "is before date_from" }
          : undefined
    )
  )
  .annotations(strict)
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

export const DeleteResult = Schema.Struct({
  deleted: required(Schema.Literal(true), "Always true: the record is gone")
}).annotations({ identifier: "DeleteResult" })
