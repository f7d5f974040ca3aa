import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { InsightList, ListInsightsParams } from "../domain/Insight.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class InsightsApi extends HttpApiGroup.make("insights")
  .add(
    HttpApiEndpoint.get("list", "/insights")
      .setUrlParams(ListInsightsParams)
      .addSuccess(InsightList)
      .annotate(
        OpenApi.Summary,
        "Findings of the terminal-trace detection (failed spans, tool loops, cost and latency anomalies, token blow-ups), newest first"
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
