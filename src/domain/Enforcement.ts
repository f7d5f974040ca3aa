import { Schema } from "effect"
import { ProjectId, TraceId } from "./Ids.ts"
import { Text } from "./Json.ts"
import { withExamples } from "./Examples.ts"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** Body of POST /api/v1/enforcement/check (strict). */
export const EnforcementCheckRequest = withExamples(
  Schema.Struct({
    run_id: Text(200).pipe(Schema.minLength(1)),
    project_id: Schema.optional(ProjectId),
    trace_id: Schema.optional(TraceId),
    tool_name: Schema.optional(Text(200)),
    tool_args_hash: Schema.optional(Text(200)),
    model: Schema.optional(Text(200)),
    proposed_tokens: Schema.optional(Schema.Int.pipe(Schema.between(0, Number.MAX_SAFE_INTEGER))),
    proposed_usd: Schema.optional(Schema.Number.pipe(Schema.finite(), Schema.between(0, 1e12))),
    step_index: Schema.optional(Schema.Int.pipe(Schema.between(0, Number.MAX_SAFE_INTEGER)))
  }).annotations({ identifier: "EnforcementCheckRequest", ...strict }),
  {
    run_id: "7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10",
    trace_id: "7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10",
    tool_name: "book_flight",
    model: "gpt-4o-mini",
    proposed_usd: 0.02,
    step_index: 3
  }
)
export type EnforcementCheckRequest = typeof EnforcementCheckRequest.Type

export const EnforcementDecision = Schema.Struct({
  verdict: Schema.Literal("allow", "block", "hold"),
  policy_id: Schema.NullOr(Schema.UUID),
  policy_type: Schema.NullOr(Schema.String),
  reason: Schema.String,
  hold_id: Schema.optional(Schema.UUID)
}).annotations({ identifier: "EnforcementDecision" })
export type EnforcementDecision = typeof EnforcementDecision.Type

/** The decision cannot be made: the policy state could not be loaded in time. Enforcement turns it into a block. */
export class PolicyStateUnavailable extends Schema.TaggedError<PolicyStateUnavailable>()("PolicyStateUnavailable", {
  reason: Schema.String
}) {}
