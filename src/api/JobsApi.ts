import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Job, JobPath } from "../domain/Job.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class JobsApi extends HttpApiGroup.make("jobs")
  .add(
    HttpApiEndpoint.get("get", "/jobs/:jobId")
      .setPath(JobPath)
      .addSuccess(Job)
      .annotate(OpenApi.Summary, "Status of an asynchronous job owned by the account")
      .annotate(
        OpenApi.Description,
        "Follows background work another request started: a trace's downstream processing or an asynchronous batch. The status moves from queued to running to completed (or dead_letter once its attempts are used up); a batch reports progress and, when done, its result."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
