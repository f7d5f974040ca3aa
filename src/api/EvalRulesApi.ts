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
      .annotate(
        OpenApi.Description,
        "Runs an evaluation on every trace of the account that becomes completed or failed and matches the rule's filter (project, name pattern, status, metadata), sampled at `sampling_rate`. With a `webhook_url`, each result is POSTed there, signed with a secret that is returned in this response only."
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/eval-rules")
      .setUrlParams(ListEvalRulesParams)
      .addSuccess(EvalRuleList)
      .annotate(OpenApi.Summary, "The account's eval rules, newest first")
      .annotate(OpenApi.Description, "The account's eval rules that are not deleted, newest first.")
  )
  .add(
    HttpApiEndpoint.get("get", "/eval-rules/:id")
      .setPath(EvalRulePath)
      .addSuccess(EvalRule)
      .annotate(OpenApi.Summary, "An eval rule of the account")
      .annotate(
        OpenApi.Description,
        "One eval rule of the caller's account (the webhook secret is never returned again)."
      )
  )
  .add(
    HttpApiEndpoint.del("remove", "/eval-rules/:id")
      .setPath(EvalRulePath)
      .addSuccess(DeleteResult)
      .annotate(OpenApi.Summary, "Soft-delete an eval rule: it stops applying and its pending webhooks stop")
      .annotate(
        OpenApi.Description,
        "Stops the rule: no new runs start from it and its pending webhook deliveries are dropped."
      )
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/eval-rules/:id/deliveries")
      .setPath(EvalRulePath)
      .setUrlParams(ListEvalRulesParams)
      .addSuccess(WebhookDeliveryList)
      .annotate(OpenApi.Summary, "The rule's webhook delivery log: one entry per attempt, newest first")
      .annotate(
        OpenApi.Description,
        "Every webhook delivery attempt of the rule: target, status code or error, duration and whether it will be retried."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
