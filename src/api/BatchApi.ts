import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { BatchAccepted, BatchRequest, BatchResult } from "../domain/Batch.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class BatchApi extends HttpApiGroup.make("batch")
  .add(
    HttpApiEndpoint.post("run", "/batch")
      .setPayload(BatchRequest)
      .addSuccess(BatchResult)
      .addSuccess(BatchAccepted, { status: 202 })
      .annotate(
        OpenApi.Summary,
        "Run up to 100 API operations in order as the caller, each answered with its own status and body; async: true returns a job"
      )
      .annotate(
        OpenApi.Description,
        "Runs each operation as if it were its own request with the caller's credentials (validation, authentication and rate limits included), in order, and answers with one status and body per operation; a failed operation does not stop the others. With `async: true` the batch is queued and 202 returns a job to follow on /api/v1/jobs/{jobId}."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
