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
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
