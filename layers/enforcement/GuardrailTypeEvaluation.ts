import type { SqlClient } from "@effect/sql"
import { Cause, Effect, Either, Schema } from "effect"
import type { EnforcementCheckRequest } from "#src/domain/Enforcement"
import { isBuiltInPolicyType, type Policy } from "#src/domain/Guardrail"
import type { AccountId } from "#src/domain/Ids"
import { type ActionRecord, type CustomOutcome, type CustomOutcomes, MAX_RECENT } from "#src/domain/PolicyEvaluation"
import { PolicyStateUnavailable } from "#src/domain/Errors"
import {
  type AllowedDecisionsFilter,
  type GuardrailInput,
  GuardrailStateUnavailable,
  type GuardrailRunCounters,
  type GuardrailType
} from "../extensions/GuardrailTypes.ts"

const MAX_COUNT = 100_000
const MAX_REASON = 1000
const MAX_HOLD_SECONDS = 30 * 86_400

const reasonOf = (cause: Cause.Cause<unknown>): string => {
  const failure = [...Cause.failures(cause), ...Cause.defects(cause)][0]
  if (failure instanceof Error) return failure.message
  if (typeof failure === "object" && failure !== null && "message" in failure) return String(failure.message)
  if (typeof failure === "object" && failure !== null && "_tag" in failure) return String(failure._tag)
  if (Cause.isInterruptedOnly(cause)) return "interrupted"
  return String(failure)
}

/** An evaluator's answer as an outcome, or why it is not one (then the check fails closed). */
const toOutcome = (answer: unknown): CustomOutcome | string => {
  if (typeof answer !== "object" || answer === null) return "it answered something that is not a verdict"
  const { verdict, reason, expires_in_seconds } = answer as Record<string, unknown>
  if (verdict === "allow") return { verdict: "allow" }
  if (verdict !== "block" && verdict !== "hold") return `it answered verdict ${JSON.stringify(verdict)}`
  if (typeof reason !== "string" || reason.trim() === "") return `it answered ${verdict} without a reason`
  const said = reason.slice(0, MAX_REASON)
  if (verdict === "block") return { verdict, reason: said }
  if (expires_in_seconds === undefined) return { verdict, reason: said, expiresInSeconds: null }
  if (
    typeof expires_in_seconds !== "number" ||
    !Number.isInteger(expires_in_seconds) ||
    expires_in_seconds < 1 ||
    expires_in_seconds > MAX_HOLD_SECONDS
  ) {
    return `it answered hold with expires_in_seconds ${String(expires_in_seconds)} (1 to ${MAX_HOLD_SECONDS})`
  }
  return { verdict, reason: said, expiresInSeconds: expires_in_seconds }
}

const stateUnavailable = (e: unknown) =>
  new GuardrailStateUnavailable({
    reason: e instanceof Error ? e.message.slice(0, 200) : "the database could not be read"
  })

/**
 * Runs the evaluators of installed guardrail types for the policies of their types that apply to a check, all at
 * once, before the decision (the decision then takes their answers in the policies' order, as the built-ins').
 * Answers undefined (no effect to run) when no such policy applies. Any evaluator's failure, defect or malformed answer fails the whole
 * check with PolicyStateUnavailable: the caller blocks, as when the policy store cannot be read.
 */
export const makeGuardrailTypeEvaluation = (
  sql: SqlClient.SqlClient,
  // biome-ignore lint/suspicious/noExplicitAny: each installed type has params of its own
  types: ReadonlyArray<GuardrailType<any, unknown>>
) => {
  const byType = new Map(types.map((t) => [t.type, t]))
  /** Decoded params per stored policy (policies are cached objects: decoded once per load). */
  const decoded = new WeakMap<Policy, Either.Either<unknown, string>>()
  const paramsOf = (policy: Policy, type: GuardrailType<unknown, unknown>) => {
    let params = decoded.get(policy)
    if (params === undefined) {
      params = Either.mapLeft(Schema.decodeUnknownEither(type.params)(policy.params), (e) => e.message.slice(0, 300))
      decoded.set(policy, params)
    }
    return params
  }

  const readRun = (accountId: AccountId, runId: string) =>
    sql<{ spent_usd: number; tokens: number; recent: ReadonlyArray<ActionRecord> }>`
      SELECT spent_usd::float8 AS spent_usd, tokens::float8 AS tokens,
             tapedeck_run_recent(account_id, run_id, ${MAX_RECENT}) AS recent
      FROM enforcement_runs
      WHERE account_id = ${accountId} AND run_id = ${runId}`.pipe(
      Effect.map(
        (rows): GuardrailRunCounters => ({
          spent_usd: rows[0]?.spent_usd ?? 0,
          tokens: rows[0]?.tokens ?? 0,
          recent: (rows[0]?.recent ?? []).map((r) => ({ tool: r.tool, args: r.args, step: r.step, at: r.atMs }))
        })
      ),
      Effect.mapError(stateUnavailable)
    )

  const allowedCount = (accountId: AccountId) => (filter: AllowedDecisionsFilter) =>
    Effect.suspend(() => {
      if (!(filter?.since instanceof Date) || Number.isNaN(filter.since.getTime())) {
        return Effect.fail(new GuardrailStateUnavailable({ reason: "allowedCount needs `since`, a valid Date" }))
      }
      const cap = Math.min(MAX_COUNT, Math.max(1, Math.floor(filter.at_most ?? MAX_COUNT)))
      return sql<{ n: number }>`
        SELECT count(*)::int AS n FROM (
          SELECT 1 FROM enforcement_decisions
          WHERE account_id = ${accountId} AND verdict = 'allow' AND created_at >= ${filter.since.toISOString()}::timestamptz
            ${filter.tool_name === undefined ? sql`` : sql`AND tool_name = ${filter.tool_name}`}
            ${filter.model === undefined ? sql`` : sql`AND model = ${filter.model}`}
            ${filter.run_id === undefined ? sql`` : sql`AND run_id = ${filter.run_id}`}
          LIMIT ${cap}) x`.pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0)),
        Effect.mapError(stateUnavailable)
      )
    })

  return (
    accountId: AccountId,
    request: EnforcementCheckRequest,
    policies: ReadonlyArray<Policy>,
    nowMs: number
  ): Effect.Effect<CustomOutcomes, PolicyStateUnavailable> | undefined => {
    const applicable = policies.filter(
      (p) =>
        p.enabled &&
        (p.projectId === null || p.projectId === request.project_id) &&
        !isBuiltInPolicyType(p.type) &&
        byType.has(p.type)
    )
    if (applicable.length === 0) return undefined
    return Effect.gen(function* () {
      const run = yield* Effect.cached(readRun(accountId, request.run_id))
      const now = new Date(nowMs)
      const outcomes = yield* Effect.forEach(
        applicable,
        (policy) => {
          const type = byType.get(policy.type)!
          const params = paramsOf(policy, type)
          if (Either.isLeft(params)) {
            return Effect.succeed([
              policy.id,
              { verdict: "block", reason: `policy ${policy.id} (${policy.type}) has invalid parameters` }
            ] as const)
          }
          const input: GuardrailInput<unknown> = {
            accountId,
            policy: { id: policy.id, type: policy.type, projectId: policy.projectId },
            params: params.right,
            request,
            now,
            run,
            allowedCount: allowedCount(accountId)
          }
          const failed = (reason: string) =>
            new PolicyStateUnavailable({
              reason: `guardrail ${policy.id} (${policy.type}) failed: ${reason}`.slice(0, 500)
            })
          // A throw inside `evaluate` (before it returns an effect) is a defect like any other.
          return Effect.suspend(() => type.evaluate(input)).pipe(
            Effect.catchAllCause((cause) => Effect.fail(failed(reasonOf(cause)))),
            Effect.flatMap((answer) => {
              const outcome = toOutcome(answer)
              return typeof outcome === "string"
                ? Effect.fail(failed(outcome))
                : Effect.succeed([policy.id, outcome] as const)
            })
          )
        },
        { concurrency: "unbounded" }
      )
      return new Map<string, CustomOutcome>(outcomes)
    })
  }
}
