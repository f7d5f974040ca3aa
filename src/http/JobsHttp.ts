import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { JobQueue } from "#layers/jobs/JobQueue"
import { TapedeckApi } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const JobsHttpLive = HttpApiBuilder.group(TapedeckApi, "jobs", (handlers) =>
  Effect.gen(function*() {
    const jobs = yield* JobQueue
    return handlers.handle("get", ({ path }) =>
      Effect.gen(function*() {
        const { accountId } = yield* CurrentPrincipal
        return yield* jobs.get(accountId, path.jobId)
      }).pipe(answerDomainErrors))
  })).pipe(Layer.provide(JobQueue.Default))
