import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Job, JobPath } from "../domain/Job.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class JobsApi extends HttpApiGroup.make("jobs")
  .add(
    HttpApiEndpoint.get("get", "/jobs/:jobId")
      .setPath(JobPath)
      .addSuccess(Job)
      .annotate(OpenApi.Summary, "Status of an asynchronous job owned by the account")
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
