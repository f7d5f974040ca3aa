import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  CreateEvalRuleRequest,
  EvalRule,
  EvalRuleList,
  EvalRulePath,
  ListEvalRulesParams,
  WebhookDeliveryList
} from "../domain/EvalRule.ts"
import { DeleteResult } from "../domain/Trace.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class EvalRulesApi extends HttpApiGroup.make("evalRules")
  .add(
    HttpApiEndpoint.post("create", "/eval-rules")
      .setPayload(CreateEvalRuleRequest)
      .addSuccess(EvalRule)
      .annotate(
        OpenApi.Summary,
        "Run an evaluation automatically on matching terminal traces; with a webhook, the signing secret is returned once"
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/eval-rules")
      .setUrlParams(ListEvalRulesParams)
      .addSuccess(EvalRuleList)
      .annotate(OpenApi.Summary, "The account's eval rules, newest first")
  )
  .add(
    HttpApiEndpoint.get("get", "/eval-rules/:id")
      .setPath(EvalRulePath)
      .addSuccess(EvalRule)
      .annotate(OpenApi.Summary, "An eval rule of the account")
  )
  .add(
    HttpApiEndpoint.del("remove", "/eval-rules/:id")
      .setPath(EvalRulePath)
      .addSuccess(DeleteResult)
      .annotate(OpenApi.Summary, "Soft-delete an eval rule: it stops applying and its pending webhooks stop")
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/eval-rules/:id/deliveries")
      .setPath(EvalRulePath)
      .setUrlParams(ListEvalRulesParams)
      .addSuccess(WebhookDeliveryList)
      .annotate(OpenApi.Summary, "The rule's webhook delivery log: one entry per attempt, newest first")
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
