import { Schema } from "effect"
import { ProjectId, TraceId } from "./Ids.ts"
import { isStorableText, Text } from "./Json.ts"
import { withExamples } from "./Examples.ts"
import { optional, required } from "./Described.ts"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** Body of POST /api/v1/enforcement/check (strict). */
export const EnforcementCheckRequest = withExamples(
  Schema.Struct({
    run_id: Schema.propertySignature(Text(200).pipe(Schema.minLength(1))).annotations({
      description: "The agent run the action belongs to: budgets, step and loop limits count per run"
    }),
    project_id: Schema.optional(ProjectId).annotations({
      description: "Applies the project's guardrails besides the account-wide ones"
    }),
    trace_id: Schema.optional(TraceId).annotations({
      description: "The run's trace: a block or hold is recorded on it as a span"
    }),
    tool_name: Schema.optional(Text(200)).annotations({
      description: "The tool about to be called (matched by tool allow/deny lists and approvals)"
    }),
    tool_args_hash: Schema.optional(Text(200)).annotations({
      description: "A hash of the tool's arguments: the loop breaker counts identical calls"
    }),
    model: Schema.optional(Text(200)).annotations({
      description: "The model about to be called (matched by model allowlists)"
    }),
    proposed_tokens: Schema.optional(Schema.Int.pipe(Schema.between(0, Number.MAX_SAFE_INTEGER))).annotations({
      description: "Tokens the action will use, counted against token budgets"
    }),
    proposed_usd: Schema.optional(Schema.Number.pipe(Schema.finite(), Schema.between(0, 1e12))).annotations({
      description: "What the action will cost in USD, counted against spend budgets"
    }),
    step_index: Schema.optional(Schema.Int.pipe(Schema.between(0, Number.MAX_SAFE_INTEGER))).annotations({
      description: "The action's step number in the run, checked against max_steps"
    })
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
  verdict: required(
    Schema.Literal("allow", "block", "hold"),
    "allow: go ahead; block: do not; hold: wait for a person's approval"
  ),
  policy_id: required(Schema.NullOr(Schema.UUID), "The guardrail that decided, or null when none objected"),
  policy_type: required(Schema.NullOr(Schema.String), "That guardrail's type (budget_usd, tool_denylist…), or null"),
  reason: required(Schema.String, "Why, in one sentence"),
  hold_id: optional(Schema.UUID, "With hold: the approval to wait for (poll or approve it by this id)")
}).annotations({ identifier: "EnforcementDecision" })
export type EnforcementDecision = typeof EnforcementDecision.Type

const CHECK_KEYS: ReadonlySet<string> = new Set([
  "run_id",
  "project_id",
  "trace_id",
  "tool_name",
  "tool_args_hash",
  "model",
  "proposed_tokens",
  "proposed_usd",
  "step_index"
])

// Schema.UUID's pattern.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

const isText200 = (v: unknown): v is string => typeof v === "string" && v.length <= 200 && isStorableText(v)
const isUuid = (v: unknown): v is string => typeof v === "string" && UUID.test(v)
const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0
const isUsd = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0 && v <= 1e12

/**
 * EnforcementCheckRequest decoded by hand, for the check's lean route (the Schema interpreter's per-field work is a
 * visible part of the hottest route's CPU: docs/performance.md): what it accepts the schema accepts, with the same
 * output (the same keys, in the schema's order). Undefined when it does not accept; the caller then asks the schema,
 * whose answer (its value or its issues) is authoritative. test/domain/enforcement-check-decoder.test.ts holds the two to each other.
 */
export const decodeCheckRequest = (input: unknown): EnforcementCheckRequest | undefined => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return undefined
  const o = input as Record<string, unknown>
  for (const key in o) if (!CHECK_KEYS.has(key)) return undefined
  const runId = o.run_id
  if (!isText200(runId) || runId.length === 0 || !Object.hasOwn(o, "run_id")) return undefined
  const out: Record<string, unknown> = { run_id: runId }
  // Each optional field as Schema.optional decodes it: absent stays absent, present undefined stays undefined.
  const field = (key: string, valid: (v: unknown) => boolean) => {
    if (!Object.hasOwn(o, key)) return true
    const v = o[key]
    if (v !== undefined && !valid(v)) return false
    out[key] = v
    return true
  }
  const accepted =
    field("project_id", isUuid) &&
    field("trace_id", isUuid) &&
    field("tool_name", isText200) &&
    field("tool_args_hash", isText200) &&
    field("model", isText200) &&
    field("proposed_tokens", isCount) &&
    field("proposed_usd", isUsd) &&
    field("step_index", isCount)
  return accepted ? (out as EnforcementCheckRequest) : undefined
}
