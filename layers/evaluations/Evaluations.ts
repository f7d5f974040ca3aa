import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Option, Schema } from "effect"
import {
  type CreateEvaluationRequest,
  DETAIL_RUNS,
  type EvaluationDetail,
  type EvaluationGateRequest,
  type EvaluationGateResult,
  EvaluationId,
  EvaluationRunId,
  type GateRun,
  type RunEvaluationRequest,
  type RunEvaluationResult,
  type RunItem
} from "#src/domain/Evaluation"
import { gateVerdict, REGRESSION_TOLERANCE } from "#src/domain/EvaluationScoring"
import type { AccountId, TraceId } from "#src/domain/Ids"
import { AppConfig } from "../config/AppConfig.ts"
import type { JobHandler, JobOf } from "../jobs/JobHandlers.ts"
import { JobQueue } from "../jobs/JobQueue.ts"
import { Traces } from "../traces/Traces.ts"
import { EvaluationRepo, type RunOutcome } from "./EvaluationRepo.ts"
import { Judge, type JudgeCriterion, type JudgeOutcome } from "./Judge.ts"
import { RUBRIC_PROMPT_VERSION } from "./JudgePrompt.ts"
import { BaselineRunUnscored, EvaluationRunNotFound, JobFailed, NoOwnedTraces, TraceNotFound } from "#src/domain/Errors"


const isUuid = Schema.is(Schema.UUID)

const stored = (outcome: JudgeOutcome): RunOutcome =>
  outcome._tag === "Judged"
    ? {
      status: "completed",
      score: outcome.score,
      criterionScores: outcome.criterionScores,
      reasoning: outcome.reasoning,
      inputTokens: outcome.inputTokens,
      outputTokens: outcome.outputTokens,
      costUsd: outcome.costUsd,
      error: null
    }
    : {
      status: "failed",
      score: null,
      criterionScores: outcome.criterionScores,
      reasoning: null,
      inputTokens: outcome.inputTokens,
      outputTokens: outcome.outputTokens,
      costUsd: outcome.costUsd,
      error: outcome.error
    }

const failedBefore = (error: string): RunOutcome => ({
  status: "failed",
  score: null,
  criterionScores: [],
  reasoning: null,
  inputTokens: 0,
  outputTokens: 0,
  costUsd: 0,
  error
})

/**
 * Evaluations: weighted LLM-judged criteria, runs queued on the durable job queue (one job per run, so several
 * instances share the work), and the CI gate that judges traces synchronously with a bounded pool.
 */
export class Evaluations extends Effect.Service<Evaluations>()("tapedeck/Evaluations", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* EvaluationRepo
    const traces = yield* Traces
    const jobs = yield* JobQueue
    const judge = yield* Judge
    const config = yield* AppConfig
    // Shared by every gate request of this instance, so concurrent gates cannot multiply the load on the provider.
    const gateSlots = yield* Effect.makeSemaphore(config.evalGateConcurrency)

    const create = Effect.fn("Evaluations.create")(function*(accountId: AccountId, request: CreateEvaluationRequest) {
      return yield* repo.insert(accountId, {
        id: EvaluationId.make(crypto.randomUUID()),
        projectId: request.project_id?.toLowerCase() ?? null,
        name: request.name,
        description: request.description ?? null,
        judgeModel: request.judge_model ?? config.defaultJudgeModel,
        criteria: request.criteria.map((c) => ({ name: c.name, description: c.description, weight: c.weight })),
        isPublic: request.is_public
      })
    })

    const list = (accountId: AccountId, limit: number, offset: number) => repo.list(accountId, limit, offset)

    /** The evaluation with the caller's DETAIL_RUNS most recent runs of it, newest first. */
    const get = Effect.fn("Evaluations.get")(function*(accountId: AccountId, evaluationId: EvaluationId) {
      const { evaluation } = yield* repo.findVisible(accountId, evaluationId)
      const runs = yield* repo.recentRuns(accountId, evaluationId, DETAIL_RUNS)
      return { ...evaluation, runs } satisfies EvaluationDetail
    })

    const remove = (accountId: AccountId, evaluationId: EvaluationId) => repo.softDelete(accountId, evaluationId)

    /**
     * Queues one run (and one `evaluation.run` job) per trace id that is a live trace of the account, in one
     * transaction; ids of missing or foreign traces are skipped (the result may be empty). The evaluation must be
     * visible to the account (`EvaluationNotFound`). The judge model is `judgeModel`, else the evaluation's.
     */
    const queueRuns = Effect.fn("Evaluations.queueRuns")(
      function*(accountId: AccountId, evaluationId: EvaluationId, traceIds: ReadonlyArray<string>, judgeModel?: string) {
        const { evaluation } = yield* repo.findVisible(accountId, evaluationId)
        const wanted = [...new Set(traceIds.filter(isUuid).map((id) => id.toLowerCase()))]
        const owned = yield* repo.ownedTraceIds(accountId, wanted)
        const runs: Array<RunItem> = wanted
          .filter((id) => owned.has(id))
          .map((traceId) => ({ id: crypto.randomUUID(), traceId, status: "queued" as const }))
        yield* repo.insertQueued(accountId, evaluationId, runs, judgeModel ?? evaluation.judgeModel, RUBRIC_PROMPT_VERSION)
        yield* jobs.enqueueMany(accountId, "evaluation.run", runs.map((r) => ({ runId: EvaluationRunId.make(r.id) })))
        return runs as ReadonlyArray<RunItem>
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** POST …/run: `NoOwnedTraces` when none of the ids is a trace of the account. */
    const run = Effect.fn("Evaluations.run")(
      function*(accountId: AccountId, evaluationId: EvaluationId, request: RunEvaluationRequest) {
        const runs = yield* queueRuns(accountId, evaluationId, request.trace_ids, request.judge_model)
        if (runs.length === 0) return yield* new NoOwnedTraces()
        return { evaluation_id: evaluationId.toLowerCase(), runs, status: "running" } satisfies RunEvaluationResult
      }
    )

    /** Judges one trace of the account; a trace that vanished meanwhile is a failed outcome, not an error. */
    const judgeTrace = (accountId: AccountId, traceId: TraceId, criteria: ReadonlyArray<JudgeCriterion>, model: string) =>
      traces.get(accountId, traceId).pipe(
        Effect.matchEffect({
          onFailure: () => Effect.succeed(failedBefore(`trace ${traceId} no longer exists`)),
          onSuccess: (trace) => judge.judge(criteria, trace, model).pipe(Effect.map(stored))
        })
      )

    /** Runs a queued run to its end (the `evaluation.run` job); a run already finished is left alone. */
    const processRun = Effect.fn("Evaluations.processRun")(function*(runId: EvaluationRunId) {
      const claimed = yield* repo.claimRun(runId)
      if (Option.isNone(claimed)) return
      const { accountId, criteria, judgeModel, traceId } = claimed.value
      yield* Effect.annotateCurrentSpan({ "evaluation.run_id": runId, "trace.id": traceId })
      // Within the job's lease (the worker gives up at lease − 5 s): a slow judge fails the run, never strands it.
      const seconds = Math.max(5, config.jobLeaseSeconds - 15)
      const outcome = Option.isNone(criteria)
        ? failedBefore("the evaluation was deleted before the run started")
        : yield* judgeTrace(accountId, traceId, criteria.value, judgeModel).pipe(
          Effect.timeoutTo({
            duration: Duration.seconds(seconds),
            onTimeout: () => failedBefore(`the judge did not finish within ${seconds} s`),
            onSuccess: (o) => o
          })
        )
      yield* repo.finishRun(runId, outcome)
    })

    /** Marks a run failed (its job gave up). */
    const abandonRun = (runId: EvaluationRunId, error: string) => repo.finishRun(runId, failedBefore(error))

    /**
     * The CI gate. Every trace must be a live trace of the caller (`TraceNotFound` otherwise: it never skips one)
     * and every baseline run one of the caller's completed runs of this evaluation (`EvaluationRunNotFound`,
     * `BaselineRunUnscored`). Each trace reuses the latest completed run of the same evaluation, judge model and
     * rubric version made after the trace last changed, or is judged now (TAPEDECK_EVAL_GATE_CONCURRENCY traces at
     * once on this instance, across all gate requests) and its run stored. Fails closed: a trace that could not be
     * judged fails the gate and is listed in `failed_runs` with why; it counts neither in the score nor in the
     * regression.
     */
    const gate = Effect.fn("Evaluations.gate")(
      function*(accountId: AccountId, evaluationId: EvaluationId, request: EvaluationGateRequest) {
        const { evaluation } = yield* repo.findVisible(accountId, evaluationId)
        const traceIds = request.trace_ids.map((id) => id.toLowerCase() as TraceId)
        const owned = yield* repo.ownedTraceIds(accountId, traceIds)
        const missing = traceIds.find((id) => !owned.has(id))
        if (missing !== undefined) return yield* new TraceNotFound({ traceId: missing })

        const baselineIds = [...new Set((request.baseline_run_ids ?? []).map((id) => id.toLowerCase()))]
        const baselineRuns = yield* repo.findRuns(accountId, evaluationId, baselineIds)
        const baseline: Array<number> = []
        for (const id of baselineIds) {
          const found = baselineRuns.get(id)
          if (found === undefined) return yield* new EvaluationRunNotFound({ runId: id as EvaluationRunId })
          if (found.score === null) {
            return yield* new BaselineRunUnscored({ runId: id as EvaluationRunId, status: found.status })
          }
          baseline.push(found.score)
        }

        const model = evaluation.judgeModel
        const reusable = yield* repo.reusableRuns(accountId, evaluationId, traceIds, model, RUBRIC_PROMPT_VERSION)
        const runs = yield* Effect.forEach(traceIds, (traceId) => {
          const previous = reusable.get(traceId)
          if (previous !== undefined) return Effect.succeed<GateRun>({ ...previous, reused: true })
          return Effect.gen(function*() {
            // The database's clock, as the trace's updated_at that reuse compares it with.
            const startedAt = yield* repo.now()
            const outcome = yield* judgeTrace(accountId, traceId, evaluation.criteria, model)
            const run = yield* repo.insertFinished({
              id: EvaluationRunId.make(crypto.randomUUID()),
              accountId,
              evaluationId,
              traceId,
              judgeModel: model,
              rubricVersion: RUBRIC_PROMPT_VERSION,
              startedAt,
              outcome
            })
            return { ...run, reused: false } satisfies GateRun
          }).pipe(gateSlots.withPermits(1))
        }, { concurrency: config.evalGateConcurrency })

        const verdict = gateVerdict({
          scores: runs.map((r) => r.status === "completed" ? r.score : null),
          threshold: request.threshold,
          failOnRegression: request.fail_on_regression,
          baseline: baselineIds.length > 0 ? baseline : undefined,
          tolerance: REGRESSION_TOLERANCE
        })
        return {
          passed: verdict.passed,
          score: verdict.score,
          threshold: request.threshold,
          regression: verdict.regression,
          runs,
          ...(verdict.baselineScore === undefined ? {} : { baseline_score: verdict.baselineScore }),
          regression_tolerance: REGRESSION_TOLERANCE,
          judge_model: model,
          reasons: verdict.reasons,
          judged_traces: verdict.judged,
          failed_runs: runs.flatMap((r) =>
            r.status === "completed"
              ? []
              : [{ trace_id: r.traceId, run_id: r.id, error: r.error ?? `the run is ${r.status}` }]
          )
        } satisfies EvaluationGateResult
      }
    )

    return { create, list, get, remove, queueRuns, run, gate, processRun, abandonRun } as const
  }),
  dependencies: [EvaluationRepo.Default, Judge.Default, Traces.Default, JobQueue.Default, AppConfig.Default]
}) {}

/** For an `evaluation.run` job dead-lettered because its worker died on every attempt: the run is failed, not left running. */
export const evaluationRunLostHandler = Effect.gen(function*() {
  const evaluations = yield* Evaluations
  return (job: JobOf<"evaluation.run">) =>
    evaluations.abandonRun(job.payload.runId, "internal error: the worker running it stopped on every attempt")
})

/**
 * The job handler for `evaluation.run`. Failures of the judge are the run's outcome (failed, with the reason),
 * not the job's; an unexpected error fails the attempt (retried with backoff), and on the last attempt the run is
 * marked failed so it never stays running.
 */
export const evaluationRunHandler = Effect.gen(function*() {
  const evaluations = yield* Evaluations
  const handler: JobHandler<"evaluation.run"> = (job) =>
    evaluations.processRun(job.payload.runId).pipe(
      Effect.catchAllCause((cause) => {
        const reason = `evaluation run failed: ${Cause.pretty(cause).split("\n")[0]}`
        const giveUp = job.attempts >= job.maxAttempts
          ? evaluations.abandonRun(job.payload.runId, "internal error: the run could not be completed").pipe(
            Effect.catchAllCause(() => Effect.void)
          )
          : Effect.void
        return giveUp.pipe(Effect.zipRight(Effect.fail(new JobFailed({ reason }))))
      })
    )
  return handler
})
