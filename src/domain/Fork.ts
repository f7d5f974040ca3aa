import { Schema } from "effect"
import { pageParams } from "./Page.ts"
import { ForkId, SpanId, TraceId } from "./Ids.ts"
import { JsonObject, JsonValue, Text } from "./Json.ts"

export const ForkStatus = Schema.Literal("pending", "replaying", "completed", "failed")
export type ForkStatus = typeof ForkStatus.Type

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** Body of POST /api/v1/forks (strict). */
export const CreateForkRequest = Schema.Struct({
  trace_id: TraceId,
  fork_point_span_id: SpanId,
  // Unknown would also accept a missing key: the API requires it (null is a value).
  modified_input: JsonValue.pipe(Schema.filter((u) => u !== undefined, { message: () => "is missing" })),
  name: Schema.optional(Text(500)),
  description: Schema.optional(Text(10_000)),
  mock_outputs: Schema.optional(JsonObject).annotations({
    description: "Tool name or span id → the output to use instead of the recorded one"
  })
}).annotations({ identifier: "CreateForkRequest", ...strict })
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
