import { Schema } from "effect"
import { pageParams } from "./Page.ts"
import { ProjectId, TraceId } from "./Ids.ts"
import { Text } from "./Json.ts"
import { withExamples } from "./Examples.ts"

export const EvaluationId = Schema.UUID.pipe(Schema.brand("EvaluationId"))
export type EvaluationId = typeof EvaluationId.Type

export const EvaluationRunId = Schema.UUID.pipe(Schema.brand("EvaluationRunId"))
export type EvaluationRunId = typeof EvaluationRunId.Type

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** Most criteria an evaluation may have, and most traces a run or gate may name. */
export const MAX_CRITERIA = 10
export const MAX_TRACES_PER_RUN = 50
/** How many of the caller's most recent runs an EvaluationDetail carries. */
export const DETAIL_RUNS = 50

/** A non-empty text of at most `max` characters that PostgreSQL can store. */
const Name = (max: number) => Text(max).pipe(Schema.minLength(1, { message: () => "must not be empty" }))

/** A criterion weight: a finite number 0..10. */
export const Weight = Schema.Number.pipe(Schema.finite(), Schema.between(0, 10))

/** One weighted criterion of an evaluation (strict; names unique within the evaluation). */
export const EvaluationCriterion = Schema.Struct({
  name: Name(100),
  description: Text(1000),
  weight: Schema.optionalWith(Weight, { default: () => 1 })
}).annotations({ identifier: "EvaluationCriterion", ...strict })
export type EvaluationCriterion = typeof EvaluationCriterion.Type

const uniqueBy = <A>(key: (a: A) => string, what: string) => (items: ReadonlyArray<A>) => {
  const seen = new Set<string>()
  for (const item of items) {
    const k = key(item)
    if (seen.has(k)) return `${what} ${k} appears more than once`
    seen.add(k)
  }
  return true
}

const Criteria = Schema.Array(EvaluationCriterion).pipe(
  Schema.minItems(1),
  Schema.maxItems(MAX_CRITERIA),
  Schema.filter(uniqueBy((c: EvaluationCriterion) => JSON.stringify(c.name), "criterion name"))
)

/** 1..50 unique trace ids (compared case-insensitively). */
const TraceIds = Schema.Array(TraceId).pipe(
  Schema.minItems(1),
  Schema.maxItems(MAX_TRACES_PER_RUN),
  Schema.filter(uniqueBy((id: string) => id.toLowerCase(), "trace id"), { jsonSchema: { uniqueItems: true } })
)

const JudgeModel = Name(100)

/** Body of POST /api/v1/evaluations (strict). */
export const CreateEvaluationRequest = withExamples(
  Schema.Struct({
    name: Name(500),
    criteria: Criteria,
    description: Schema.optional(Text(10_000)),
    project_id: Schema.optional(ProjectId),
    judge_model: Schema.optional(JudgeModel),
    is_public: Schema.optionalWith(Schema.Boolean, { default: () => false })
  }).annotations({ identifier: "CreateEvaluationRequest", ...strict }),
  {
    name: "Helpful booking answers",
    description: "Scores the final answer of the travel agent",
    criteria: [
      { name: "correctness", description: "The booked flight matches the dates and cities the user asked for", weight: 2 },
      { name: "clarity", description: "The answer states the flight, the price and the confirmation code", weight: 1 }
    ]
  }
)
export type CreateEvaluationRequest = typeof CreateEvaluationRequest.Type

/** Body of POST /api/v1/evaluations/{evaluationId}/run (strict). */
export const RunEvaluationRequest = withExamples(
  Schema.Struct({
    trace_ids: TraceIds,
    judge_model: Schema.optional(JudgeModel)
  }).annotations({ identifier: "RunEvaluationRequest", ...strict }),
  { trace_ids: ["7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10"] }
)
export type RunEvaluationRequest = typeof RunEvaluationRequest.Type

/** Body of POST /api/v1/evaluations/{evaluationId}/gate (strict). */
export const EvaluationGateRequest = withExamples(
  Schema.Struct({
    trace_ids: TraceIds,
    threshold: Schema.optionalWith(Schema.Number.pipe(Schema.finite(), Schema.between(0, 1)), { default: () => 0.7 }),
    fail_on_regression: Schema.optionalWith(Schema.Boolean, { default: () => true }),
    baseline_run_ids: Schema.optional(Schema.Array(EvaluationRunId).pipe(Schema.maxItems(1000)))
  }).annotations({ identifier: "EvaluationGateRequest", ...strict }),
  { trace_ids: ["7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10"], threshold: 0.8 }
)
export type EvaluationGateRequest = typeof EvaluationGateRequest.Type

/** A criterion in responses (weight always present). */
export const CriterionWire = Schema.Struct({ name: Schema.String, description: Schema.String, weight: Schema.Number })

/** An evaluation in responses (camelCase). */
export const Evaluation = Schema.Struct({
  id: EvaluationId,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  projectId: Schema.NullOr(ProjectId),
  judgeModel: Schema.String,
  criteria: Schema.Array(CriterionWire),
  isPublic: Schema.Boolean,
  createdAt: Schema.String
}).annotations({ identifier: "Evaluation" })
export type Evaluation = typeof Evaluation.Encoded

export const RunStatus = Schema.Literal("queued", "running", "completed", "failed")
export type RunStatus = typeof RunStatus.Type

/** The judge's verdict on one criterion of a run. */
export const CriterionScore = Schema.Struct({
  name: Schema.String,
  weight: Schema.Number,
  score: Schema.Number,
  reason: Schema.String
})
export type CriterionScore = typeof CriterionScore.Type

/** One run of an evaluation against a trace, as shown in the detail's history and the gate's result. */
export const EvaluationRun = Schema.Struct({
  id: EvaluationRunId,
  traceId: TraceId,
  status: RunStatus,
  score: Schema.NullOr(Schema.Number),
  criterionScores: Schema.Array(CriterionScore),
  reasoning: Schema.NullOr(Schema.String),
  judgeModel: Schema.String,
  inputTokens: Schema.Int,
  outputTokens: Schema.Int,
  costUsd: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  completedAt: Schema.NullOr(Schema.String)
}).annotations({ identifier: "EvaluationRun" })
export type EvaluationRun = typeof EvaluationRun.Encoded

export const EvaluationDetail = Schema.Struct({
  ...Evaluation.fields,
  runs: Schema.Array(EvaluationRun)
}).annotations({ identifier: "EvaluationDetail" })
export type EvaluationDetail = typeof EvaluationDetail.Encoded

export const EvaluationList = Schema.Struct({
  items: Schema.Array(Evaluation),
  total: Schema.Int,
  limit: Schema.Int,
  offset: Schema.Int
}).annotations({ identifier: "EvaluationList" })
export type EvaluationList = typeof EvaluationList.Encoded

export const ListEvaluationsParams = Schema.Struct({ ...pageParams }).annotations(strict)

export const EvaluationPath = Schema.Struct({ evaluationId: EvaluationId })

export const RunItem = Schema.Struct({
  id: EvaluationRunId,
  traceId: TraceId,
  status: Schema.Literal("queued")
}).annotations({ ...strict })
export type RunItem = typeof RunItem.Encoded

/** Answer of POST …/run (strict). */
export const RunEvaluationResult = Schema.Struct({
  evaluation_id: EvaluationId,
  runs: Schema.Array(RunItem),
  status: Schema.Literal("running")
}).annotations({ identifier: "RunEvaluationResult", ...strict })
export type RunEvaluationResult = typeof RunEvaluationResult.Encoded

/** A gate's run: the run record plus whether an earlier completed run was reused. */
export const GateRun = Schema.Struct({
  ...EvaluationRun.fields,
  reused: Schema.Boolean
}).annotations({ identifier: "GateRun" })
export type GateRun = typeof GateRun.Encoded

const Fraction = Schema.Number.pipe(Schema.between(0, 1))

/** A trace of the gate whose run failed: it has no score, and it fails the gate. */
export const GateFailedRun = Schema.Struct({
  trace_id: TraceId,
  run_id: EvaluationRunId,
  error: Schema.String
}).annotations({ identifier: "GateFailedRun" })
export type GateFailedRun = typeof GateFailedRun.Encoded

/** Answer of POST …/gate. */
export const EvaluationGateResult = Schema.Struct({
  passed: Schema.Boolean,
  score: Fraction,
  threshold: Fraction,
  regression: Schema.Boolean,
  runs: Schema.Array(GateRun),
  baseline_score: Schema.optional(Fraction),
  regression_tolerance: Schema.Number,
  judge_model: Schema.String,
  reasons: Schema.Array(Schema.String),
  /** How many traces were judged: `score` is their mean. */
  judged_traces: Schema.Int,
  /** Per trace that could not be judged, its run and why; any entry makes `passed` false. */
  failed_runs: Schema.Array(GateFailedRun)
}).annotations({
  identifier: "EvaluationGateResult",
  description: "score is the mean over the judged traces; a failed run is not counted as 0 but fails the gate " +
    "(listed in failed_runs), and regression compares the judged traces with the baseline only."
})
export type EvaluationGateResult = typeof EvaluationGateResult.Encoded

/** Missing, deleted, or neither owned nor public. */
export class EvaluationNotFound extends Schema.TaggedError<EvaluationNotFound>()("EvaluationNotFound", {
  evaluationId: EvaluationId
}) {}
/** A run that is not one of the caller's runs of the evaluation. */
export class EvaluationRunNotFound extends Schema.TaggedError<EvaluationRunNotFound>()("EvaluationRunNotFound", {
  runId: EvaluationRunId
}) {}
/** None of the traces named by a run request is a live trace of the caller. */
export class NoOwnedTraces extends Schema.TaggedError<NoOwnedTraces>()("NoOwnedTraces", {}) {}
/** A baseline run that has no score (it failed or has not finished). */
export class BaselineRunUnscored extends Schema.TaggedError<BaselineRunUnscored>()("BaselineRunUnscored", {
  runId: EvaluationRunId,
  status: RunStatus
}) {}
