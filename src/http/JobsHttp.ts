import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { JobQueue } from "#layers/jobs/JobQueue"
import { NotFound } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const JobsHttpLive = HttpApiBuilder.group(TapedeckApi, "jobs", (handlers) =>
  Effect.gen(function*() {
    const jobs = yield* JobQueue
    return handlers.handle("get", ({ path }) =>
      Effect.gen(function*() {
        const { accountId } = yield* CurrentPrincipal
        return yield* jobs.get(accountId, path.jobId)
      }).pipe(Effect.catchTags({ JobNotFound: (e) => new NotFound({ message: `job ${e.jobId} not found` }) })))
  })).pipe(Layer.provide(JobQueue.Default))
