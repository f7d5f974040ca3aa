import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Usage, UsageParams } from "../domain/Usage.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class UsageApi extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("get", "/usage")
      .setUrlParams(UsageParams)
      .addSuccess(Usage)
      .annotate(OpenApi.Summary, "The account's usage in a calendar month (UTC; default: the current one)")
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
