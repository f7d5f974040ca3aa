import { Context, Data, Effect, Schema } from "effect"
import { isBuiltInPolicyType } from "#src/domain/Guardrail"
import type { AccountId } from "#src/domain/Ids"

/** The enforcement check an evaluator is asked about: the body of POST /api/v1/enforcement/check, as sent. */
export interface GuardrailCheckRequest {
  readonly run_id: string
  readonly project_id?: string | undefined
  readonly trace_id?: string | undefined
  readonly tool_name?: string | undefined
  readonly tool_args_hash?: string | undefined
  readonly model?: string | undefined
  readonly proposed_tokens?: number | undefined
  readonly proposed_usd?: number | undefined
  readonly step_index?: number | undefined
}

/** A run's counters as the built-in types see them: allowed actions only (docs/enforcement.md). */
export interface GuardrailRunCounters {
  readonly spent_usd: number
  readonly tokens: number
  /** The run's latest allowed actions (at most 5000), oldest first; `at` in epoch milliseconds. */
  readonly recent: ReadonlyArray<{
    readonly tool: string | null
    readonly args: string | null
    readonly step: number | null
    readonly at: number
  }>
}

/** Which recorded allowed decisions of the account `allowedCount` counts. */
export interface AllowedDecisionsFilter {
  /** Decisions recorded at or after this instant. */
  readonly since: Date
  readonly tool_name?: string | undefined
  readonly model?: string | undefined
  readonly run_id?: string | undefined
  /** Stop counting here (a quota needs to know only whether its limit is reached): at most 100000. */
  readonly at_most?: number | undefined
}

/** The state an evaluator cannot reach (a database error): the check fails closed. */
export class GuardrailStateUnavailable extends Data.TaggedError("GuardrailStateUnavailable")<{
  readonly reason: string
}> {}

/** What an evaluator gets for one policy of its type and one check. */
export interface GuardrailInput<P> {
  readonly accountId: AccountId
  /** The guardrail being evaluated. */
  readonly policy: { readonly id: string; readonly type: string; readonly projectId: string | null }
  /** Its params, decoded with the type's schema. */
  readonly params: P
  readonly request: GuardrailCheckRequest
  /** When the check began. */
  readonly now: Date
  /** The run's counters (read from the database when asked for, once per check). */
  readonly run: Effect.Effect<GuardrailRunCounters, GuardrailStateUnavailable>
  /**
   * How many checks of the account were answered allow since `filter.since` (matching the filter), counted in the
   * database's decision log: the same on every instance. Checks still being decided are not in it yet.
   */
  readonly allowedCount: (filter: AllowedDecisionsFilter) => Effect.Effect<number, GuardrailStateUnavailable>
}

/** An evaluator's answer: no objection, a block, or a hold for a person's approval (the holds API decides it). */
export type GuardrailVerdict =
  | { readonly verdict: "allow" }
  | { readonly verdict: "block"; readonly reason: string }
  | { readonly verdict: "hold"; readonly reason: string; readonly expires_in_seconds?: number | undefined }

/**
 * A policy type of one's own: its name, its params' schema (the guardrails API checks params with it and OpenAPI
 * shows it) and its evaluator. Any failure of the evaluator (an error, a defect) or no answer within the check's
 * deadline is a fail-closed block.
 */
export interface GuardrailType<P = unknown, E = unknown> {
  /** The policy `type`: lowercase letters, digits and `_`, starting with a letter; not a built-in type's. */
  readonly type: string
  /** One sentence for the API reference. */
  readonly description: string
  /** The params' schema: its encoded side is the JSON the API takes, its decoded side what `evaluate` gets. */
  // biome-ignore lint/suspicious/noExplicitAny: the params' JSON form is the extension's own
  readonly params: Schema.Schema<P, any, never>
  /** Example params for the API reference (encoded). */
  readonly example?: unknown
  readonly evaluate: (input: GuardrailInput<P>) => Effect.Effect<GuardrailVerdict, E>
}

/** The installed guardrail types, in installation order; none by default. */
export class GuardrailTypes extends Context.Reference<GuardrailTypes>()("tapedeck/GuardrailTypes", {
  // biome-ignore lint/suspicious/noExplicitAny: each installed type has params of its own
  defaultValue: (): ReadonlyArray<GuardrailType<any, unknown>> => []
}) {}

/** Why a guardrail type was refused at start: the server does not start. */
export class GuardrailTypeRefused extends Data.TaggedError("GuardrailTypeRefused")<{
  readonly type: string
  readonly reason: string
}> {
  override get message() {
    return `guardrail type "${this.type}" refused: ${this.reason}`
  }
}

const TYPE_NAME = /^[a-z][a-z0-9_]{0,62}$/

/** The installed types with one more, or GuardrailTypeRefused (a bad or taken name, a missing evaluator). */
export const installGuardrailType = (
  // biome-ignore lint/suspicious/noExplicitAny: each installed type has params of its own
  definition: GuardrailType<any, unknown>
) =>
  Effect.flatMap(GuardrailTypes, (installed) => {
    const refuse = (reason: string) => Effect.fail(new GuardrailTypeRefused({ type: String(definition.type), reason }))
    if (typeof definition.type !== "string" || !TYPE_NAME.test(definition.type)) {
      return refuse("a type is 1 to 63 lowercase letters, digits or _, starting with a letter")
    }
    if (isBuiltInPolicyType(definition.type)) return refuse("it is a built-in policy type")
    if (installed.some((t) => t.type === definition.type)) return refuse("another extension installed it already")
    if (typeof definition.evaluate !== "function") return refuse("it has no evaluate function")
    if (!Schema.isSchema(definition.params)) return refuse("its params is not a Schema")
    if (definition.example !== undefined && !Schema.is(Schema.encodedSchema(definition.params))(definition.example)) {
      return refuse("its example is not valid params")
    }
    return Effect.succeed([...installed, definition])
  })
