import { SqlClient } from "@effect/sql"
import { DateTime, Effect } from "effect"
import { type EnforcementCheckRequest, type EnforcementDecision, PolicyStateUnavailable } from "#src/domain/Enforcement"
import { type AccountId, SpanId } from "#src/domain/Ids"
import type { ProposedAction } from "#src/domain/PolicyEvaluation"
import { AppConfig } from "../config/AppConfig.ts"
import { Traces } from "../traces/Traces.ts"
import { PolicyStore } from "./PolicyStore.ts"

const toAction = (request: EnforcementCheckRequest): ProposedAction => ({
  runId: request.run_id,
  projectId: request.project_id,
  toolName: request.tool_name,
  toolArgsHash: request.tool_args_hash,
  model: request.model,
  proposedTokens: request.proposed_tokens,
  proposedUsd: request.proposed_usd,
  stepIndex: request.step_index
})

/**
 * Pre-call enforcement. `decide` either decides or fails with PolicyStateUnavailable: it never guesses.
 * `check` is the one place that turns that error into a verdict, and the verdict is block.
 */
export class Enforcement extends Effect.Service<Enforcement>()("tapedeck/Enforcement", {
  effect: Effect.gen(function*() {
    const store = yield* PolicyStore
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const traces = yield* Traces

    /** Decides, or fails with PolicyStateUnavailable (a store error or a timeout). */
    const decide = Effect.fn("Enforcement.decide")(function*(
      accountId: AccountId,
      request: EnforcementCheckRequest,
      startedAt: number = performance.now(),
      decisionId: string = crypto.randomUUID()
    ) {
      const action = toAction(request)
      const audit = { decisionId, traceId: request.trace_id, startedAt }
      const evaluation = yield* store.policies(accountId).pipe(
        Effect.flatMap((policies) => store.decideAtomically(accountId, action, policies, audit)),
        // The deadline must hold even when stopping the work is slow (cancelling a pg query needs another pool
        // connection): the interruption finishes in the background.
        Effect.disconnect,
        Effect.timeoutFail({
          duration: `${config.enforcementTimeoutMs} millis`,
          onTimeout: () => new PolicyStateUnavailable({ reason: `no answer within ${config.enforcementTimeoutMs} ms` })
        })
      )
      return {
        verdict: evaluation.verdict,
        policy_id: evaluation.policy?.id ?? null,
        policy_type: evaluation.policy?.type ?? null,
        reason: evaluation.reason,
        ...(evaluation.holdId ? { hold_id: evaluation.holdId } : {})
      } satisfies EnforcementDecision
    })

    /**
     * A fail-closed block, recorded off the hot path (the store may be the thing that is down). A decision the store
     * finished after the deadline has the same id: the block replaces it, since the block is what was answered.
     */
    const recordFailClosed = (
      accountId: AccountId,
      request: EnforcementCheckRequest,
      decisionId: string,
      decision: EnforcementDecision,
      latencyMs: number
    ) =>
      sql`
        INSERT INTO enforcement_decisions (id, account_id, run_id, trace_id, step_index, tool_name, model, verdict,
                                           policy_id, policy_type, hold_id, reason, latency_ms)
        VALUES (${decisionId}, ${accountId}, ${request.run_id}, ${request.trace_id ?? null},
                ${request.step_index ?? null}, ${request.tool_name ?? null}, ${request.model ?? null},
                ${decision.verdict}, null, null, null, ${decision.reason}, ${latencyMs})
        ON CONFLICT (id) DO UPDATE SET verdict = EXCLUDED.verdict, policy_id = NULL, policy_type = NULL, hold_id = NULL,
                                       reason = EXCLUDED.reason, latency_ms = EXCLUDED.latency_ms`.pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("could not record an enforcement decision", cause)),
        Effect.forkDaemon
      )

    /** The trace a check names tells the whole story: a block or hold becomes an action span of it (if owned). */
    const traceDecision = (accountId: AccountId, request: EnforcementCheckRequest, decision: EnforcementDecision) =>
      Effect.gen(function*() {
        const traceId = request.trace_id
        if (traceId === undefined || decision.verdict === "allow") return
        const now = DateTime.unsafeMake(Date.now())
        const span = {
          id: SpanId.make(crypto.randomUUID()),
          parent_id: null,
          span_type: "action" as const,
          name: `enforcement: ${decision.verdict}`,
          input: { tool_name: request.tool_name ?? null, model: request.model ?? null, step_index: request.step_index ?? null },
          output: decision,
          metadata: { enforcement: { run_id: request.run_id, policy_type: decision.policy_type } },
          started_at: now,
          ended_at: now
        }
        // A trace the account does not own is not an error of the check: nothing is added to it.
        yield* traces.annotate(accountId, traceId, span).pipe(Effect.catchTag("TraceNotFound", () => Effect.void))
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("could not add an enforcement span to the trace", cause)),
        Effect.forkDaemon
      )

    /** Fail-closed: the one place where PolicyStateUnavailable becomes a verdict. */
    const check = Effect.fn("Enforcement.check")(function*(accountId: AccountId, request: EnforcementCheckRequest) {
      const started = performance.now()
      const decisionId = crypto.randomUUID()
      const decision = yield* decide(accountId, request, started, decisionId).pipe(
        Effect.catchTag("PolicyStateUnavailable", (e) => {
          const block: EnforcementDecision = {
            verdict: "block",
            policy_id: null,
            policy_type: null,
            reason: `policy state unavailable: ${e.reason}`
          }
          return Effect.as(recordFailClosed(accountId, request, decisionId, block, performance.now() - started), block)
        })
      )
      yield* traceDecision(accountId, request, decision)
      return decision
    })

    return { decide, check } as const
  }),
  dependencies: [AppConfig.Default, Traces.Default]
}) {}
