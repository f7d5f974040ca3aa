import { Schema } from "effect"
import { pageParams } from "./Page.ts"
import { ProjectId, TraceId } from "./Ids.ts"
import { Text } from "./Json.ts"
import { withExamples } from "./Examples.ts"
import { optional, required, withDefault } from "./Described.ts"

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
  name: required(Name(100), "The criterion's name, unique within the evaluation (1 to 100 characters)"),
  description: required(Text(1000), "What the judge checks for this criterion, in plain words (at most 1000 characters)"),
  weight: withDefault(Weight, () => 1, "How much the criterion counts in the overall score, 0 to 10; default 1")
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
    name: required(Name(500), "The evaluation's name (1 to 500 characters)"),
    criteria: required(Criteria, "1 to 10 weighted criteria the judge scores each trace on; names must be unique"),
    description: optional(Text(10_000), "What the evaluation is for (at most 10,000 characters)"),
    project_id: optional(ProjectId, "The project the evaluation belongs to"),
    judge_model: optional(JudgeModel, "The model that judges the traces; omitted, the server's default judge model"),
    is_public: withDefault(Schema.Boolean, () => false, "Other accounts may read and run it; default false")
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
    trace_ids: required(TraceIds, "1 to 50 distinct ids of your traces to judge"),
    judge_model: optional(JudgeModel, "Judge with this model instead of the evaluation's own")
  }).annotations({ identifier: "RunEvaluationRequest", ...strict }),
  { trace_ids: ["7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10"] }
)
export type RunEvaluationRequest = typeof RunEvaluationRequest.Type

/** Body of POST /api/v1/evaluations/{evaluationId}/gate (strict). */
export const EvaluationGateRequest = withExamples(
  Schema.Struct({
    trace_ids: required(TraceIds, "1 to 50 distinct ids of your traces to judge; a trace already judged is not judged again"),
    threshold: withDefault(
      Schema.Number.pipe(Schema.finite(), Schema.between(0, 1)),
      () => 0.7,
      "The mean score (0 to 1) the traces must reach to pass; default 0.7"
    ),
    fail_on_regression: withDefault(Schema.Boolean, () => true, "Also fail when the score falls below the baseline's; default true"),
    baseline_run_ids: optional(
      Schema.Array(EvaluationRunId).pipe(Schema.maxItems(1000)),
      "Earlier completed runs whose mean score is the baseline for the regression check (at most 1000)"
    )
  }).annotations({ identifier: "EvaluationGateRequest", ...strict }),
  { trace_ids: ["7f9c2ba4-e88f-4d6a-9c41-3f1d6a2b8e10"], threshold: 0.8 }
)
export type EvaluationGateRequest = typeof EvaluationGateRequest.Type

/** A criterion in responses (weight always present). */
export const CriterionWire = Schema.Struct({
  name: required(Schema.String, "The criterion's name"),
  description: required(Schema.String, "What the judge checks for this criterion"),
  weight: required(Schema.Number, "How much it counts in the overall score (0 to 10)")
})

/** An evaluation in responses (camelCase). */
export const Evaluation = Schema.Struct({
  id: required(EvaluationId, "The evaluation's id"),
  name: required(Schema.String, "The evaluation's name"),
  description: required(Schema.NullOr(Schema.String), "What the evaluation is for, or null"),
  projectId: required(Schema.NullOr(ProjectId), "The project it belongs to, or null"),
  judgeModel: required(Schema.String, "The model that judges traces by default"),
  criteria: required(Schema.Array(CriterionWire), "The weighted criteria each trace is scored on"),
  isPublic: required(Schema.Boolean, "Other accounts may read and run it"),
  createdAt: required(Schema.String, "When it was created (ISO 8601)")
}).annotations({ identifier: "Evaluation" })
export type Evaluation = typeof Evaluation.Encoded

export const RunStatus = Schema.Literal("queued", "running", "completed", "failed")
export type RunStatus = typeof RunStatus.Type

/** The judge's verdict on one criterion of a run. */
export const CriterionScore = Schema.Struct({
  name: required(Schema.String, "The criterion's name"),
  weight: required(Schema.Number, "The criterion's weight"),
  score: required(Schema.Number, "The judge's score for this criterion, 0 to 1"),
  reason: required(Schema.String, "Why the judge gave that score")
})
export type CriterionScore = typeof CriterionScore.Type

/** One run of an evaluation against a trace, as shown in the detail's history and the gate's result. */
export const EvaluationRun = Schema.Struct({
  id: required(EvaluationRunId, "The run's id"),
  traceId: required(TraceId, "The trace that was judged"),
  status: required(RunStatus, "queued, running, completed or failed"),
  score: required(Schema.NullOr(Schema.Number), "The weighted score, 0 to 1; null until the run completes"),
  criterionScores: required(Schema.Array(CriterionScore), "The judge's score and reason per criterion"),
  reasoning: required(Schema.NullOr(Schema.String), "The judge's overall reasoning, or null"),
  judgeModel: required(Schema.String, "The model that judged the trace"),
  inputTokens: required(Schema.Int, "Prompt tokens the judge used"),
  outputTokens: required(Schema.Int, "Completion tokens the judge used"),
  costUsd: required(Schema.NullOr(Schema.Number), "What the judging cost in USD, or null when unknown"),
  error: required(Schema.NullOr(Schema.String), "Why the run failed, or null"),
  createdAt: required(Schema.String, "When the run was queued (ISO 8601)"),
  completedAt: required(Schema.NullOr(Schema.String), "When it finished (ISO 8601), or null")
}).annotations({ identifier: "EvaluationRun" })
export type EvaluationRun = typeof EvaluationRun.Encoded

export const EvaluationDetail = Schema.Struct({
  ...Evaluation.fields,
  runs: required(Schema.Array(EvaluationRun), "Your most recent runs of it (at most 50), newest first")
}).annotations({ identifier: "EvaluationDetail" })
export type EvaluationDetail = typeof EvaluationDetail.Encoded

export const EvaluationList = Schema.Struct({
  items: required(Schema.Array(Evaluation), "This page's evaluations"),
  total: required(Schema.Int, "How many evaluations match, over all pages"),
  limit: required(Schema.Int, "The page size asked for"),
  offset: required(Schema.Int, "How many were skipped before this page")
}).annotations({ identifier: "EvaluationList" })
export type EvaluationList = typeof EvaluationList.Encoded

export const ListEvaluationsParams = Schema.Struct({ ...pageParams }).annotations(strict)

export const EvaluationPath = Schema.Struct({ evaluationId: EvaluationId })

export const RunItem = Schema.Struct({
  id: required(EvaluationRunId, "The queued run's id"),
  traceId: required(TraceId, "The trace it will judge"),
  status: required(Schema.Literal("queued"), "Always queued: poll the evaluation to see the result")
}).annotations({ ...strict })
export type RunItem = typeof RunItem.Encoded

/** Answer of POST …/run (strict). */
export const RunEvaluationResult = Schema.Struct({
  evaluation_id: required(EvaluationId, "The evaluation that runs"),
  runs: required(Schema.Array(RunItem), "One queued run per trace of yours; traces you do not own are skipped"),
  status: required(Schema.Literal("running"), "Always running: the runs complete in the background")
}).annotations({ identifier: "RunEvaluationResult", ...strict })
export type RunEvaluationResult = typeof RunEvaluationResult.Encoded

/** A gate's run: the run record plus whether an earlier completed run was reused. */
export const GateRun = Schema.Struct({
  ...EvaluationRun.fields,
  reused: required(Schema.Boolean, "An earlier completed run of the same trace was reused instead of judging again")
}).annotations({ identifier: "GateRun" })
export type GateRun = typeof GateRun.Encoded

const Fraction = Schema.Number.pipe(Schema.between(0, 1))

/** A trace of the gate whose run failed: it has no score, and it fails the gate. */
export const GateFailedRun = Schema.Struct({
  trace_id: required(TraceId, "The trace that could not be judged"),
  run_id: required(EvaluationRunId, "Its failed run"),
  error: required(Schema.String, "Why the run failed")
}).annotations({ identifier: "GateFailedRun" })
export type GateFailedRun = typeof GateFailedRun.Encoded

/** Answer of POST …/gate. */
export const EvaluationGateResult = Schema.Struct({
  passed: required(Schema.Boolean, "The score reached the threshold, no run failed, and (if checked) there is no regression"),
  score: required(Fraction, "The mean score of the judged traces, 0 to 1"),
  threshold: required(Fraction, "The threshold the score was compared with"),
  regression: required(Schema.Boolean, "The score fell below the baseline by more than the tolerance"),
  runs: required(Schema.Array(GateRun), "The run of each trace, new or reused"),
  baseline_score: optional(Fraction, "The baseline runs' mean score, when baseline runs were given"),
  regression_tolerance: required(Schema.Number, "How far below the baseline the score may fall before it is a regression"),
  judge_model: required(Schema.String, "The model that judged the traces"),
  reasons: required(Schema.Array(Schema.String), "Why the gate failed, one sentence each; empty when it passed"),
  /** How many traces were judged: `score` is their mean. */
  judged_traces: required(Schema.Int, "How many traces were judged: score is their mean"),
  /** Per trace that could not be judged, its run and why; any entry makes `passed` false. */
  failed_runs: required(Schema.Array(GateFailedRun), "Each trace that could not be judged, its run and why; any entry fails the gate")
}).annotations({
  identifier: "EvaluationGateResult",
  description: "score is the mean over the judged traces; a failed run is not counted as 0 but fails the gate " +
    "(listed in failed_runs), and regression compares the judged traces with the baseline only."
})
export type EvaluationGateResult = typeof EvaluationGateResult.Encoded

