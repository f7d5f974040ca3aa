import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Exit, Runtime, Schedule } from "effect"
import { type EnforcementCheckRequest, type EnforcementDecision } from "#src/domain/Enforcement"
import { type AccountId, SpanId, type TraceId } from "#src/domain/Ids"
import type { Evaluation, ProposedAction } from "#src/domain/PolicyEvaluation"
import { AppConfig } from "../config/AppConfig.ts"
import { Traces } from "../traces/Traces.ts"
import { type DecisionAudit, type FailClosedRecord, PolicyStore } from "./PolicyStore.ts"
import { PolicyStateUnavailable, type CredentialRevoked } from "#src/domain/Errors"
import { GuardrailTypes } from "../extensions/GuardrailTypes.ts"
import { makeGuardrailTypeEvaluation } from "./GuardrailTypeEvaluation.ts"

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

const toDecision = (evaluation: Evaluation): EnforcementDecision => ({
  verdict: evaluation.verdict,
  policy_id: evaluation.policy?.id ?? null,
  policy_type: evaluation.policy?.type ?? null,
  reason: evaluation.reason,
  ...(evaluation.holdId ? { hold_id: evaluation.holdId } : {})
})

const newAudit = (request: EnforcementCheckRequest): DecisionAudit => ({
  // Time-ordered (UUIDv7): the decisions table grows by a row a check, and ids in the order they are made keep its
  // primary key's inserts at the index's right edge instead of on random pages (docs/performance.md).
  decisionId: Bun.randomUUIDv7(),
  traceId: request.trace_id,
  startedAt: performance.now(),
  abandoned: false,
  reachedStore: false
})

/**
 * How a fail-closed block is recorded when the store is (still) unreachable: again and again, at most 5 s apart,
 * for up to an hour; the record is idempotent. Past MAX_PENDING_RECORDS waiting at once, a block is logged instead.
 */
const RECORD_RETRY = Schedule.exponential("50 millis").pipe(
  Schedule.union(Schedule.spaced("5 seconds")),
  Schedule.upTo("1 hour")
)
const MAX_PENDING_RECORDS = 100_000
/** Fail-closed blocks recorded per transaction. */
const RECORD_BATCH = 500

/**
 * Pre-call enforcement. `decide` either decides or fails with PolicyStateUnavailable: it never guesses.
 * `check` is the one place that turns that error into a verdict, and the verdict is block.
 *
 * The hot path stays lean on purpose (no span per call, one fiber for the store's work): a check is meant to cost
 * well under a millisecond of this process's time.
 */
export class Enforcement extends Effect.Service<Enforcement>()("tapedeck/Enforcement", {
  effect: Effect.gen(function* () {
    const store = yield* PolicyStore
    const config = yield* AppConfig
    const traces = yield* Traces
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const timeoutMs = config.enforcementTimeoutMs
    const types = yield* GuardrailTypes
    /**
     * With guardrail types installed, the policies of those types are evaluated first (their evaluators, within the
     * check's deadline: one that has not answered by then is interrupted), and the decision takes their answers.
     */
    const customOutcomes =
      types.length === 0 ? undefined : makeGuardrailTypeEvaluation(yield* SqlClient.SqlClient, types)
    const noAnswer = () => new PolicyStateUnavailable({ reason: `no answer within ${timeoutMs} ms` })

    /**
     * The store's work for one check, against the deadline; `answer` is called once with its outcome (a failure when
     * the deadline passed first), and the returned function stops waiting (an interrupted check). The work is handed
     * to the store's batcher directly when it can take it (`PolicyStore.submit`), else it runs in a fiber of its own;
     * either way it is never interrupted: past the deadline the caller is answered and the work goes on to its end in
     * the background (stopping a query would need `pg_cancel_backend`, which can hit whatever that connection runs
     * next). The `abandoned` flag tells the work to start no further attempt; `recordFailClosed` settles what it did.
     */
    const startDecision = (
      accountId: AccountId,
      request: EnforcementCheckRequest,
      action: ProposedAction,
      audit: DecisionAudit,
      liveKey: string | null,
      answer: (outcome: Effect.Effect<Evaluation, PolicyStateUnavailable | CredentialRevoked>) => void
    ) => {
      let settled = false
      const timer = setTimeout(() => {
        if (settled) return
        settled = true
        audit.abandoned = true
        answer(Effect.fail(noAnswer()))
      }, timeoutMs)
      const settle = (outcome: Effect.Effect<Evaluation, PolicyStateUnavailable | CredentialRevoked>) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        answer(outcome)
      }
      // An interrupted check (the client went away) was not answered: its work may still record what it decides.
      const stop = () => {
        settled = true
        clearTimeout(timer)
      }
      // The common case (policies cached, a batched decision, no guardrail types installed) is handed to the store
      // here, without a fiber of its own.
      if (customOutcomes === undefined && store.submit?.(accountId, action, audit, liveKey, settle)) return stop
      runFork(
        Effect.flatMap(store.policies(accountId), (policies) => {
          const evaluating = customOutcomes?.(accountId, request, policies, Date.now())
          return evaluating === undefined
            ? store.decideAtomically(accountId, action, policies, audit, liveKey)
            : evaluating.pipe(
                Effect.timeoutFail({ duration: timeoutMs, onTimeout: noAnswer }),
                Effect.flatMap((custom) =>
                  // Answered fail-closed meanwhile: nothing is decided (the record is the fail-closed block).
                  audit.abandoned
                    ? Effect.fail(noAnswer())
                    : store.decideAtomically(accountId, action, policies, audit, liveKey, custom)
                )
              )
        })
      ).addObserver(settle)
      return stop
    }

    /**
     * Decides, or fails with PolicyStateUnavailable (a store error or a timeout), or with CredentialRevoked when
     * `liveKey` (the caller's API key, verified from a cache) turned out revoked: then nothing was decided.
     */
    const decide = (
      accountId: AccountId,
      request: EnforcementCheckRequest,
      audit: DecisionAudit = newAudit(request),
      liveKey: string | null = null
    ) =>
      Effect.map(
        Effect.async<Evaluation, PolicyStateUnavailable | CredentialRevoked>((resume) => {
          const stop = startDecision(accountId, request, toAction(request), audit, liveKey, resume)
          return Effect.sync(stop)
        }),
        toDecision
      )

    /**
     * Fail-closed blocks waiting to be recorded, written off the hot path by one fiber in batches of up to
     * RECORD_BATCH (the store may be the thing that is down): under overload a record per transaction took a pooled
     * connection each and kept the checks from theirs. A batch is retried until stored, so every answered check has
     * its record; a record takes over the decision's id, so whatever the timed-out work stored meanwhile is replaced
     * (and an allow's counters taken back).
     */
    const pendingRecords: Array<FailClosedRecord> = []
    let recording = false
    const recordPending: Effect.Effect<void> = Effect.suspend(() => {
      if (pendingRecords.length === 0) {
        recording = false
        return Effect.void
      }
      const batch = pendingRecords.splice(0, RECORD_BATCH)
      return store.recordFailClosed(batch).pipe(
        Effect.retry(RECORD_RETRY),
        Effect.catchAllCause((cause) =>
          Effect.logError(`could not record ${batch.length} fail-closed enforcement decisions`, cause).pipe(
            Effect.annotateLogs({ decisionIds: batch.map((r) => r.audit.decisionId).join(",") })
          )
        ),
        Effect.zipRight(recordPending)
      )
    })

    const recordFailClosed = (
      accountId: AccountId,
      request: EnforcementCheckRequest,
      audit: DecisionAudit,
      reason: string
    ) =>
      Effect.suspend(() => {
        if (pendingRecords.length >= MAX_PENDING_RECORDS) {
          return Effect.logError("too many fail-closed decisions waiting to be recorded: one is dropped").pipe(
            Effect.annotateLogs({ decisionId: audit.decisionId, runId: request.run_id })
          )
        }
        pendingRecords.push({
          accountId,
          action: toAction(request),
          audit,
          reason,
          latencyMs: performance.now() - audit.startedAt
        })
        if (!recording) {
          recording = true
          runFork(recordPending)
        }
        return Effect.void
      })

    /** The trace a check names tells the whole story: a block or hold becomes an action span of it (if owned). */
    const traceDecision = (
      accountId: AccountId,
      request: EnforcementCheckRequest,
      decision: EnforcementDecision,
      traceId: TraceId
    ) =>
      Effect.gen(function* () {
        const now = DateTime.unsafeMake(Date.now())
        const span = {
          id: SpanId.make(crypto.randomUUID()),
          parent_id: null,
          span_type: "action" as const,
          name: `enforcement: ${decision.verdict}`,
          input: {
            tool_name: request.tool_name ?? null,
            model: request.model ?? null,
            step_index: request.step_index ?? null
          },
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

    const answered = (accountId: AccountId, request: EnforcementCheckRequest, decision: EnforcementDecision) =>
      request.trace_id === undefined || decision.verdict === "allow"
        ? Effect.succeed(decision)
        : Effect.as(traceDecision(accountId, request, decision, request.trace_id), decision)

    /**
     * Fail-closed: the one place where PolicyStateUnavailable becomes a verdict. `liveKey`: see `decide`; a revoked
     * key is not a verdict but the caller's failure (401).
     */
    const check = (accountId: AccountId, request: EnforcementCheckRequest, liveKey: string | null = null) =>
      Effect.async<EnforcementDecision, CredentialRevoked>((resume) => {
        const audit = newAudit(request)
        const failClosed = (e: PolicyStateUnavailable | CredentialRevoked) => {
          if (e._tag === "CredentialRevoked") return Effect.fail(e)
          audit.abandoned = true
          const block: EnforcementDecision = {
            verdict: "block",
            policy_id: null,
            policy_type: null,
            reason: `policy state unavailable: ${e.reason}`
          }
          return Effect.zipRight(
            recordFailClosed(accountId, request, audit, block.reason),
            answered(accountId, request, block)
          )
        }
        const conclude = (outcome: Effect.Effect<Evaluation, PolicyStateUnavailable | CredentialRevoked>) =>
          // A decision already made (the batcher answers with its Exit) is answered without running the outcome: the
          // check's hot path (docs/performance.md, "The service's CPU per check").
          Exit.isExit(outcome) && Exit.isSuccess(outcome)
            ? answered(accountId, request, toDecision(outcome.value as Evaluation))
            : Effect.matchEffect(outcome, {
                onSuccess: (evaluation) => answered(accountId, request, toDecision(evaluation)),
                onFailure: failClosed
              })
        const stop = startDecision(accountId, request, toAction(request), audit, liveKey, (outcome) =>
          resume(conclude(outcome))
        )
        return Effect.sync(stop)
      })

    return { decide, check } as const
  }),
  dependencies: [AppConfig.Default, Traces.Default]
}) {}
