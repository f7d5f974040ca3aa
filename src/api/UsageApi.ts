import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Usage, UsageParams } from "../domain/Usage.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("get", "/usage")
      .setUrlParams(UsageParams)
      .addSuccess(Usage)
      .annotate(OpenApi.Summary, "The account's usage in a calendar month (UTC; default: the current one)")
      .annotate(
        OpenApi.Description,
        "Traces and spans recorded, OTLP exports accepted, and replays used with their tokens and cost against the monthly replay allowance, for a calendar month (UTC). `month=YYYY-MM` chooses another month."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
