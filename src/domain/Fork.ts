import { Schema } from "effect"
import { pageParams } from "./Page.ts"
import { ForkId, SpanId, TraceId } from "./Ids.ts"
import { JsonObject, JsonValue, Text } from "./Json.ts"
import { withExamples } from "./Examples.ts"
import { optional, required } from "./Described.ts"

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
  id: required(ForkId, "The fork's id"),
  traceId: required(TraceId, "The recorded trace it branches from"),
  forkPointSpanId: required(SpanId, "The span where the replay starts differing"),
  name: required(Schema.NullOr(Schema.String), "The fork's label, or null"),
  description: required(Schema.NullOr(Schema.String), "What the fork tries out, or null"),
  modifiedInput: required(Schema.Unknown, "The input the fork point runs with instead of the recorded one"),
  mockOutputs: optional(Schema.Unknown, "Tool name or span id → the output used instead of the recorded one"),
  status: required(ForkStatus, "pending (not replayed yet), replaying, completed or failed"),
  resultTraceId: required(Schema.NullOr(TraceId), "The sandbox trace the replay recorded, or null before it starts"),
  generation: optional(Schema.Int, "How many times it was replayed"),
  executionId: optional(Schema.NullOr(Schema.String), "The current replay's execution id, or null"),
  mode: optional(Schema.NullOr(Schema.Literal("sdk", "server")), "How it was replayed: by your agent through the SDK, or by the server; null before"),
  error: optional(Schema.NullOr(Schema.String), "Why the replay failed, or null"),
  createdAt: optional(Schema.String, "When it was created (ISO 8601)"),
  updatedAt: optional(Schema.String, "When it last changed (ISO 8601)")
}).annotations({ identifier: "Fork" })
export type Fork = typeof Fork.Encoded

export const ForkList = Schema.Struct({
  items: required(Schema.Array(Fork), "This page's forks, newest first"),
  total: required(Schema.Int, "How many forks there are, over all pages"),
  limit: required(Schema.Int, "The page size asked for"),
  offset: required(Schema.Int, "How many were skipped before this page")
}).annotations({ identifier: "ForkList" })

export const ListForksParams = Schema.Struct({
  ...pageParams
}).annotations(strict)

export const ForkPath = Schema.Struct({ forkId: ForkId })

/** POST /api/v1/forks/{forkId}/replay takes no body, or an empty object. */
export const ReplayRequest = Schema.Struct({}).annotations({ identifier: "ReplayRequest", ...strict })

export const ReplayResult = Schema.Struct({
  fork_id: required(ForkId, "The fork replayed"),
  result_trace_id: optional(TraceId, "The sandbox trace the replay records into"),
  status: required(Schema.Literal("replaying", "completed", "failed"), "replaying (your agent runs it through the SDK), completed or failed"),
  mode: required(Schema.Literal("sdk", "server"), "sdk: your connected agent re-runs from the fork point; server: the server re-executes the recorded model calls"),
  execution_id: optional(Schema.String, "The replay's execution id (the SDK connects with it)"),
  byte_replayed: optional(Schema.Int, "Steps answered with their recorded output, unchanged"),
  faithful_reexec: optional(Schema.Int, "Model calls the server executed again with the recorded request"),
  fidelity_caveats: optional(Schema.Array(Schema.String), "Where the replay may differ from what the agent would do, one sentence each"),
  error: optional(Schema.String, "Why the replay failed")
}).annotations({ identifier: "ReplayResult" })
export type ReplayResult = typeof ReplayResult.Type

