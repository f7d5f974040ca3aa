import { Schema } from "effect"
import { pageParams } from "./Page.ts"
import { ForkId, SpanId, TraceId } from "./Ids.ts"
import { JsonObject, JsonValue, Text } from "./Json.ts"
import { withExamples } from "./Examples.ts"

export const ForkStatus = Schema.Literal("pending", "replaying", "completed", "failed")
export type ForkStatus = typeof ForkStatus.Type

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** Body of POST /api/v1/forks (strict). */
export const CreateForkRequest = withExamples(
  Schema.Struct({
    trace_id: Schema.propertySignature(TraceId).annotations({ description: "The recorded trace to branch from (one of the account's)" }),
    fork_point_span_id: Schema.propertySignature(SpanId).annotations({
      description: "The span of that trace where the replay starts differing: it runs with modified_input"
    }),
    // Unknown would also accept a missing key: the API requires it (null is a value).
    modified_input: Schema.propertySignature(JsonValue.pipe(Schema.filter((u) => u !== undefined, { message: () => "is missing" })))
      .annotations({ description: "The input the fork point runs with instead of the recorded one (null is a value)" }),
    name: Schema.optional(Text(500)).annotations({ description: "A label for the fork, at most 500 characters" }),
    description: Schema.optional(Text(10_000)).annotations({ description: "What the fork tries out" }),
    mock_outputs: Schema.optional(JsonObject).annotations({
      description: "Tool name or span id → the output to use instead of the recorded one"
    })
  }).annotations({ identifier: "CreateForkRequest", ...strict }),
  {
    trace_id: "7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10",
    fork_point_span_id: "0b8f0e5a-1c2d-4e3f-8a9b-0c1d2e3f4a52",
    name: "What if the user wanted Porto?",
    modified_input: [{ role: "user", content: "Find me a flight from Paris to Porto on June 12" }],
    mock_outputs: { search_flights: [{ flight: "TP439", price_eur: 121 }] }
  }
)
export type CreateForkRequest = typeof CreateForkRequest.Type

/** A fork in responses (camelCase). */
export const Fork = Schema.Struct({
  id: ForkId,
  traceId: TraceId,
  forkPointSpanId: SpanId,
  name: Schema.NullOr(Schema.String),
  description: Schema.NullOr(Schema.String),
  modifiedInput: Schema.Unknown,
  mockOutputs: Schema.optional(Schema.Unknown),
  status: ForkStatus,
  resultTraceId: Schema.NullOr(TraceId),
  generation: Schema.optional(Schema.Int),
  executionId: Schema.optional(Schema.NullOr(Schema.String)),
  mode: Schema.optional(Schema.NullOr(Schema.Literal("sdk", "server"))),
  error: Schema.optional(Schema.NullOr(Schema.String)),
  createdAt: Schema.optional(Schema.String),
  updatedAt: Schema.optional(Schema.String)
}).annotations({ identifier: "Fork" })
export type Fork = typeof Fork.Encoded

export const ForkList = Schema.Struct({
  items: Schema.Array(Fork),
  total: Schema.Int,
  limit: Schema.Int,
  offset: Schema.Int
}).annotations({ identifier: "ForkList" })

export const ListForksParams = Schema.Struct({
  ...pageParams
}).annotations(strict)

export const ForkPath = Schema.Struct({ forkId: ForkId })

/** POST /api/v1/forks/{forkId}/replay takes no body, or an empty object. */
export const ReplayRequest = Schema.Struct({}).annotations({ identifier: "ReplayRequest", ...strict })

export const ReplayResult = Schema.Struct({
  fork_id: ForkId,
  result_trace_id: Schema.optional(TraceId),
  status: Schema.Literal("replaying", "completed", "failed"),
  mode: Schema.Literal("sdk", "server"),
  execution_id: Schema.optional(Schema.String),
  byte_replayed: Schema.optional(Schema.Int),
  faithful_reexec: Schema.optional(Schema.Int),
  fidelity_caveats: Schema.optional(Schema.Array(Schema.String)),
  error: Schema.optional(Schema.String)
}).annotations({ identifier: "ReplayResult" })
export type ReplayResult = typeof ReplayResult.Type

export class ForkNotFound extends Schema.TaggedError<ForkNotFound>()("ForkNotFound", { forkId: ForkId }) {}
/** The fork point is not a span of the source trace. */
export class ForkPointNotInTrace extends Schema.TaggedError<ForkPointNotInTrace>()("ForkPointNotInTrace", {
  spanId: SpanId
}) {}
export class ReplayAlreadyActive extends Schema.TaggedError<ReplayAlreadyActive>()("ReplayAlreadyActive", {
  forkId: ForkId
}) {}
export class ReplayQuotaExceeded extends Schema.TaggedError<ReplayQuotaExceeded>()("ReplayQuotaExceeded", {
  allowance: Schema.Number,
  month: Schema.String
}) {}
