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
  )
  .add(
    HttpApiEndpoint.post("create", "/evaluations")
      .setPayload(CreateEvaluationRequest)
      .addSuccess(Evaluation)
      .annotate(OpenApi.Summary, "Create an evaluation: 1 to 10 weighted criteria judged by an LLM")
  )
  .add(
    HttpApiEndpoint.get("get", "/evaluations/:evaluationId")
      .setPath(EvaluationPath)
      .addSuccess(EvaluationDetail)
      .annotate(OpenApi.Summary, "An evaluation with the caller's 50 most recent runs, newest first")
  )
  .add(
    HttpApiEndpoint.del("remove", "/evaluations/:evaluationId")
      .setPath(EvaluationPath)
      .addSuccess(DeleteResult)
      .annotate(OpenApi.Summary, "Soft-delete an evaluation (its owner only)")
  )
  .add(
    HttpApiEndpoint.post("run", "/evaluations/:evaluationId/run")
      .setPath(EvaluationPath)
      .setPayload(RunEvaluationRequest)
      .addSuccess(RunEvaluationResult)
      .annotate(OpenApi.Summary, "Queue one run per owned trace; runs are judged in the background")
  )
  .add(
    HttpApiEndpoint.post("gate", "/evaluations/:evaluationId/gate")
      .setPath(EvaluationPath)
      .setPayload(EvaluationGateRequest)
      .addSuccess(EvaluationGateResult)
      .annotate(OpenApi.Summary, "CI gate: judge the traces now and answer pass or fail against a threshold and baseline")
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
