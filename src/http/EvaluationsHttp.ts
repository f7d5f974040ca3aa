import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Evaluations } from "#layers/evaluations/Evaluations"
import type { EvaluationNotFound } from "#src/domain/Evaluation"
import type { TraceNotFound } from "#src/domain/Trace"
import { NotFound, ValidationFailed } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

const evaluationNotFound = (e: EvaluationNotFound) => new NotFound({ message: `evaluation ${e.evaluationId} not found` })
const traceNotFound = (e: TraceNotFound) => new NotFound({ message: `trace ${e.traceId} not found` })

export const EvaluationsHttpLive = HttpApiBuilder.group(TapedeckApi, "evaluations", (handlers) =>
  Effect.gen(function*() {
    const evaluations = yield* Evaluations
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.list(accountId, urlParams.limit, urlParams.offset))
        }))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.create(accountId, payload))
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.get(accountId, path.evaluationId))
        }).pipe(Effect.catchTags({ EvaluationNotFound: evaluationNotFound })))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          yield* evaluations.remove(accountId, path.evaluationId)
          return { deleted: true as const }
        }).pipe(Effect.catchTags({ EvaluationNotFound: evaluationNotFound })))
      .handle("run", ({ path, payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.run(accountId, path.evaluationId, payload))
        }).pipe(Effect.catchTags({
          EvaluationNotFound: evaluationNotFound,
          NoOwnedTraces: () => new NotFound({ message: "none of trace_ids is a trace of this account" })
        })))
      .handle("gate", ({ path, payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* evaluations.gate(accountId, path.evaluationId, payload))
        }).pipe(Effect.catchTags({
          EvaluationNotFound: evaluationNotFound,
          TraceNotFound: traceNotFound,
          EvaluationRunNotFound: (e) =>
            new NotFound({ message: `baseline run ${e.runId} is not a run of this evaluation by this account` }),
          BaselineRunUnscored: (e) =>
            new ValidationFailed({ message: `baseline_run_ids: run ${e.runId} has no score (it is ${e.status})` })
        })))
  })).pipe(Layer.provide(Evaluations.Default))
