import { Schema } from "effect"
import { Text } from "./Json.ts"

/**
 * Messages an SDK sends over GET /ws/v1/replay (JSON text frames). The server answers `registered`,
 * `pong`, `error`, and sends `replay` commands (see `ReplayCommand`).
 */
export const SdkMessage = Schema.Union(
  /** The agents this process can run; replaces any earlier registration of the connection. */
  Schema.Struct({ type: Schema.Literal("register"), agents: Schema.Array(Text(200)).pipe(Schema.maxItems(100)) }),
  /** After a reconnect: the executions this process is still running, so they are not failed. */
  Schema.Struct({
    type: Schema.Literal("resume"),
    execution_ids: Schema.Array(Schema.UUID).pipe(Schema.maxItems(100))
  }),
  /** A replay ended; the result trace has been sent through the Traces API with its result_trace_id. */
  Schema.Struct({
    type: Schema.Literal("replay_finished"),
    execution_id: Schema.UUID,
    status: Schema.Literal("completed", "failed"),
    error: Schema.optional(Schema.String.pipe(Schema.maxLength(4000))),
    byte_replayed: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
    faithful_reexec: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
    fidelity_caveats: Schema.optional(
      Schema.Array(Schema.String.pipe(Schema.maxLength(1000))).pipe(Schema.maxItems(100))
    )
  }),
  Schema.Struct({ type: Schema.Literal("ping") })
)
export type SdkMessage = typeof SdkMessage.Type

/** What the server sends an SDK to re-run one of its agents from a fork point. */
export interface ReplayCommand {
  readonly type: "replay"
  readonly execution_id: string
  readonly agent: string
  readonly fork: unknown
  readonly source_trace: unknown
  readonly fork_point_span_id: string
  readonly modified_input: unknown
  readonly mock_outputs: Record<string, unknown>
  /** Per llm_call span id: the tools and request parameters it was recorded with, to be sent again. */
  readonly model_requests: Record<string, unknown>
  readonly result_trace_id: string
}
