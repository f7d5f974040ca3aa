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
      .annotate(
        OpenApi.Description,
        "What the detection found when traces finished: failed spans, a tool called in a loop, cost or latency far above the agent's baseline, and token use that exploded. Filter by `trace_id` or `kind`; newest first."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
