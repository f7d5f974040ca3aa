import { Schema } from "effect"
import { ProjectId } from "./Ids.ts"
import { Text } from "./Json.ts"
import { withExamples } from "./Examples.ts"
import { optional, required, withDefault } from "./Described.ts"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

const Patterns = Schema.Array(Text(200)).pipe(Schema.minItems(1), Schema.maxItems(100))
const PositiveInt = Schema.Int.pipe(Schema.between(1, 1e12))

/** The parameters of each policy type (strict). */
export const PolicyParams = {
  budget_usd: Schema.Struct({
    max_usd: required(
      Schema.Number.pipe(Schema.finite(), Schema.between(0, 1e12)),
      "Most a run may spend in USD, proposed costs included"
    )
  }).annotations(strict),
  token_budget: Schema.Struct({
    max_tokens: required(
      Schema.Int.pipe(Schema.between(0, 1e15)),
      "Most tokens a run may use, proposed tokens included"
    )
  }).annotations(strict),
  max_steps: Schema.Struct({
    max_steps: required(PositiveInt, "Most steps a run may take (step_index is checked against it)")
  }).annotations(strict),
  tool_denylist: Schema.Struct({
    patterns: required(Patterns, "Tools refused: names or globs (* matches any text), 1 to 100")
  }).annotations(strict),
  tool_allowlist: Schema.Struct({
    patterns: required(Patterns, "The only tools allowed: names or globs, 1 to 100")
  }).annotations(strict),
  model_allowlist: Schema.Struct({
    patterns: required(Patterns, "The only models allowed: names or globs, 1 to 100")
  }).annotations(strict),
  loop_breaker: Schema.Struct({
    max_repeats: required(
      Schema.Int.pipe(Schema.between(1, 1000)),
      "How many identical calls (same tool and tool_args_hash) a run may make"
    ),
    window_steps: optional(
      Schema.Int.pipe(Schema.between(1, 1_000_000)),
      "Count repeats only among this many latest steps"
    )
  }).annotations(strict),
  rate: Schema.Struct({
    max_calls: required(Schema.Int.pipe(Schema.between(1, 1000)), "Most checked actions a run may make per window"),
    window_seconds: required(Schema.Int.pipe(Schema.between(1, 86_400)), "The window's length in seconds, 1 to 86400")
  }).annotations(strict),
  require_approval: Schema.Struct({
    tool_patterns: optional(Patterns, "Tools that need a person's approval: names or globs"),
    model_patterns: optional(Patterns, "Models that need a person's approval: names or globs"),
    expires_in_seconds: optional(
      Schema.Int.pipe(Schema.between(1, 30 * 86_400)),
      "An unanswered hold expires (refused) after this many seconds"
    ),
    /** "once": an approval allows one action; "run": every identical action of the run. */
    approval_scope: Schema.optionalWith(Schema.Literal("once", "run"), { default: () => "once" as const })
  }).annotations(strict)
} as const

export type PolicyType = keyof typeof PolicyParams
export const POLICY_TYPES = Object.keys(PolicyParams) as ReadonlyArray<PolicyType>
export const isBuiltInPolicyType = (type: string): type is PolicyType => Object.hasOwn(PolicyParams, type)

const common = {
  name: optional(Text(500), "A label for the guardrail (at most 500 characters)"),
  project_id: optional(ProjectId, "Applies only to checks of this project; omitted, to every check of the account"),
  enabled: withDefault(Schema.Boolean, () => true, "The guardrail is checked; default true")
}

/** One example per policy type, for the API reference (each member of the union shows its own). */
const GUARDRAIL_EXAMPLES: { readonly [T in PolicyType]: Record<string, unknown> } = {
  budget_usd: { name: "Spend cap per run", params: { max_usd: 5 } },
  token_budget: { name: "Token cap per run", params: { max_tokens: 200000 } },
  max_steps: { name: "At most 40 steps", params: { max_steps: 40 } },
  tool_denylist: { name: "No shell", params: { patterns: ["shell_*", "exec"] } },
  tool_allowlist: { name: "Travel tools only", params: { patterns: ["search_*", "book_flight"] } },
  model_allowlist: { name: "Approved models", params: { patterns: ["gpt-4o*", "claude-3-5-*"] } },
  loop_breaker: { name: "Stop repeated calls", params: { max_repeats: 3, window_steps: 10 } },
  rate: { name: "20 calls a minute", params: { max_calls: 20, window_seconds: 60 } },
  require_approval: {
    name: "A person approves bookings",
    params: { tool_patterns: ["book_*"], expires_in_seconds: 3600 }
  }
}

/** A guardrail type installed by an extension, as the guardrails API's request schema shows and checks it. */
export interface CustomGuardrailType {
  readonly type: string
  readonly description: string
  // biome-ignore lint/suspicious/noExplicitAny: an installed type's params schema is the extension's own
  readonly params: Schema.Schema<any, any, never>
  readonly example?: unknown
}

// biome-ignore lint/suspicious/noExplicitAny: an installed type's params schema is the extension's own
const member = (type: string, params: Schema.Schema<any, any, never>, example: Record<string, unknown> | undefined) => {
  const struct = Schema.Struct({ type: Schema.Literal(type), params, ...common }).annotations(strict)
  return example === undefined ? struct : withExamples(struct, { type, ...example } as never)
}

const BUILT_IN_MEMBERS = POLICY_TYPES.map((type) =>
  withExamples(
    Schema.Struct({ type: Schema.Literal(type), params: PolicyParams[type], ...common }).annotations(strict),
    { type, ...GUARDRAIL_EXAMPLES[type] } as never
  )
)

/**
 * Body of POST /api/v1/guardrails with the installed guardrail types beside the built-in ones, one member of the
 * union each (strict). Without custom types it is `CreateGuardrailRequest` itself.
 */
export const createGuardrailRequestWith = (custom: ReadonlyArray<CustomGuardrailType>) =>
  custom.length === 0
    ? CreateGuardrailRequest
    : Schema.Union(
        ...BUILT_IN_MEMBERS,
        ...custom.map((t) =>
          member(
            t.type,
            t.params.annotations({ description: t.description }),
            t.example === undefined ? undefined : { params: t.example }
          )
        )
      ).annotations({ identifier: "CreateGuardrailRequest" })

/** Body of POST /api/v1/guardrails: a policy type with its parameters (strict). */
export const CreateGuardrailRequest = Schema.Union(...BUILT_IN_MEMBERS).annotations({
  identifier: "CreateGuardrailRequest"
})
export type CreateGuardrailRequest = typeof CreateGuardrailRequest.Type

/** Body of PATCH /api/v1/guardrails/{id}: any of name, enabled, params (validated against the policy's type). */
export const UpdateGuardrailRequest = withExamples(
  Schema.Struct({
    name: optional(Schema.NullOr(Text(500)), "A new label, or null to remove it"),
    enabled: optional(Schema.Boolean, "Turn the guardrail on or off"),
    params: optional(
      Schema.Record({ key: Schema.String, value: Schema.Unknown }),
      "New parameters, checked against the guardrail's type as on creation"
    )
  }).annotations({ identifier: "UpdateGuardrailRequest", ...strict }),
  { enabled: false }
)

/** A stored policy, as evaluated. */
export interface Policy {
  readonly id: string
  /** A built-in PolicyType, or a type an extension installs (docs/extensions.md). */
  readonly type: string
  readonly projectId: string | null
  readonly enabled: boolean
  readonly params: Record<string, unknown>
  readonly createdAt: string
}
