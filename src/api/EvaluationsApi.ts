import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  CreateEvaluationRequest,
  Evaluation,
  EvaluationDetail,
  EvaluationGateRequest,
  EvaluationGateResult,
  EvaluationList,
  EvaluationPath,
  ListEvaluationsParams,
  RunEvaluationRequest,
  RunEvaluationResult
} from "../domain/Evaluation.ts"
import { DeleteResult } from "../domain/Trace.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class EvaluationsApi extends HttpApiGroup.make("evaluations")
  .add(
    HttpApiEndpoint.get("list", "/evaluations")
      .setUrlParams(ListEvaluationsParams)
      .addSuccess(EvaluationList)
      .annotate(OpenApi.Summary, "The evaluations the account can see (its own and public ones), newest first")
      .annotate(OpenApi.Description, "Evaluations owned by the caller's account and public ones, newest first.")
  )
  .add(
    HttpApiEndpoint.post("create", "/evaluations")
      .setPayload(CreateEvaluationRequest)
      .addSuccess(Evaluation)
      .annotate(OpenApi.Summary, "Create an evaluation: 1 to 10 weighted criteria judged by an LLM")
      .annotate(
        OpenApi.Description,
        "Defines how traces are scored: 1 to 10 criteria, each with a weight and a description the judge model reads. Runs use the judge model given here, or TAPEDECK_DEFAULT_JUDGE_MODEL."
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/evaluations/:evaluationId")
      .setPath(EvaluationPath)
      .addSuccess(EvaluationDetail)
      .annotate(OpenApi.Summary, "An evaluation with the caller's 50 most recent runs, newest first")
      .annotate(
        OpenApi.Description,
        "The evaluation's definition and the caller's most recent runs with their scores and per-criterion reasons."
      )
  )
  .add(
    HttpApiEndpoint.del("remove", "/evaluations/:evaluationId")
      .setPath(EvaluationPath)
      .addSuccess(DeleteResult)
      .annotate(OpenApi.Summary, "Soft-delete an evaluation (its owner only)")
      .annotate(OpenApi.Description, "Hides the evaluation from every read; only its owner can delete it.")
  )
  .add(
    HttpApiEndpoint.post("run", "/evaluations/:evaluationId/run")
      .setPath(EvaluationPath)
      .setPayload(RunEvaluationRequest)
      .addSuccess(RunEvaluationResult)
      .annotate(OpenApi.Summary, "Queue one run per owned trace; runs are judged in the background")
      .annotate(
        OpenApi.Description,
        "Queues one run per listed trace of the caller's account, optionally with another judge model; the judge scores them in the background. Read the runs on the evaluation."
      )
  )
  .add(
    HttpApiEndpoint.post("gate", "/evaluations/:evaluationId/gate")
      .setPath(EvaluationPath)
      .setPayload(EvaluationGateRequest)
      .addSuccess(EvaluationGateResult)
      .annotate(
        OpenApi.Summary,
        "CI gate: judge the traces now and answer pass or fail against a threshold and baseline"
      )
      .annotate(
        OpenApi.Description,
        "Judges the given traces now and answers pass or fail: pass when the score reaches `threshold` and, with `fail_on_regression` and baseline runs, does not fall below the baseline. Meant for CI (see the gate command of the CLI)."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
