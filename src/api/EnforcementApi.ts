import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Text } from "../domain/Json.ts"
import { EnforcementCheckRequest, EnforcementDecision } from "../domain/Enforcement.ts"
import { CreateGuardrailRequest, UpdateGuardrailRequest } from "../domain/Guardrail.ts"
import { DeleteResult } from "../domain/Trace.ts"
import { ConflictWire } from "./ApiErrors.ts"
import { Authentication, RateLimit } from "./Security.ts"
import { PageNumber } from "../domain/Page.ts"
import { withExamples } from "../domain/Examples.ts"
import { optional, required } from "../domain/Described.ts"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

export const Guardrail = Schema.Struct({
  id: required(Schema.UUID, "The guardrail's id"),
  type: required(
    Schema.String,
    "The policy: budget_usd, token_budget, max_steps, tool_denylist, tool_allowlist, model_allowlist, loop_breaker, rate or require_approval"
  ),
  name: required(Schema.NullOr(Schema.String), "Its label, or null"),
  projectId: required(Schema.NullOr(Schema.UUID), "The project it applies to, or null for the whole account"),
  enabled: required(Schema.Boolean, "It is checked"),
  params: required(Schema.Unknown, "The policy's parameters (see the create request of each type)"),
  createdAt: required(Schema.String, "When it was created (ISO 8601)"),
  updatedAt: required(Schema.String, "When it last changed (ISO 8601)")
}).annotations({ identifier: "Guardrail" })

const Free = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const IdPath = Schema.Struct({ id: Schema.UUID })
const HoldPath = Schema.Struct({ holdId: Schema.UUID })
const HoldDecision = withExamples(
  Schema.Struct({ reason: optional(Text(2000), "Why, for the record (at most 2000 characters)") }).annotations({
    identifier: "HoldDecision",
    ...strict
  }),
  { reason: "Confirmed with the customer by phone" }
)

/** The check's full path (the group is mounted under /api/v1). */
export const ENFORCEMENT_CHECK_PATH = "/api/v1/enforcement/check"

export class EnforcementApi extends HttpApiGroup.make("enforcement")
  .add(
    HttpApiEndpoint.post("check", "/enforcement/check")
      .setPayload(EnforcementCheckRequest)
      .addSuccess(EnforcementDecision)
      .annotate(OpenApi.Summary, "Decide an action before it runs: allow, block or hold (fails closed)")
      .annotate(
        OpenApi.Description,
        "Asks whether an agent may take an action (a tool call, a model call, an outbound message) under the account's guardrails. The answer is allow, block or hold (a person must approve). If the policies cannot be read within TAPEDECK_ENFORCEMENT_TIMEOUT_MS the answer is block: the check fails closed."
      )
  )
  .add(
    HttpApiEndpoint.post("createGuardrail", "/guardrails")
      .setPayload(CreateGuardrailRequest)
      .addSuccess(Guardrail)
      .annotate(OpenApi.Summary, "Create a guardrail")
      .annotate(
        OpenApi.Description,
        "Adds a rule that enforcement checks apply: a spend or token budget, a step limit, tool or model allow/deny lists, a loop breaker, a rate limit, or approval by a person (a hold). A guardrail can be limited to one project."
      )
  )
  .add(
    HttpApiEndpoint.get("listGuardrails", "/guardrails")
      .addSuccess(Schema.Struct({ items: Schema.Array(Guardrail) }))
      .annotate(OpenApi.Summary, "The account's guardrails")
      .annotate(OpenApi.Description, "Every guardrail of the caller's account, enabled or not.")
  )
  .add(
    HttpApiEndpoint.get("getGuardrail", "/guardrails/:id")
      .setPath(IdPath)
      .addSuccess(Guardrail)
      .annotate(OpenApi.Summary, "A guardrail of the account")
      .annotate(OpenApi.Description, "One guardrail of the caller's account; another account's answers 404.")
  )
  .add(
    HttpApiEndpoint.patch("updateGuardrail", "/guardrails/:id")
      .setPath(IdPath)
      .setPayload(UpdateGuardrailRequest)
      .addSuccess(Guardrail)
      .annotate(OpenApi.Summary, "Change a guardrail's name, parameters or enabled flag")
      .annotate(
        OpenApi.Description,
        "Changes a guardrail's name, parameters or enabled flag; the next checks use the new version."
      )
  )
  .add(
    HttpApiEndpoint.del("deleteGuardrail", "/guardrails/:id")
      .setPath(IdPath)
      .addSuccess(DeleteResult)
      .annotate(OpenApi.Summary, "Delete a guardrail")
      .annotate(OpenApi.Description, "Removes a guardrail; checks stop applying it at once.")
  )
  .add(
    HttpApiEndpoint.get("listHolds", "/enforcement/holds")
      .setUrlParams(
        Schema.Struct({
          status: Schema.optional(Schema.Literal("pending", "approved", "denied", "expired"))
        }).annotations(strict)
      )
      .addSuccess(Schema.Struct({ items: Schema.Array(Free) }))
      .annotate(OpenApi.Summary, "Actions held for a person's approval")
      .annotate(
        OpenApi.Description,
        "Actions an enforcement check put on hold, optionally filtered by status (pending, approved, denied, expired)."
      )
  )
  .add(
    HttpApiEndpoint.post("approveHold", "/enforcement/holds/:holdId/approve")
      .setPath(HoldPath)
      .setPayload(HoldDecision)
      .addSuccess(Free)
      .addError(ConflictWire)
      .annotate(OpenApi.Summary, "Approve a held action")
      .annotate(
        OpenApi.Description,
        "Lets a held action proceed; the agent waiting on the hold is answered allow. A hold already decided or expired answers 409."
      )
  )
  .add(
    HttpApiEndpoint.post("denyHold", "/enforcement/holds/:holdId/deny")
      .setPath(HoldPath)
      .setPayload(HoldDecision)
      .addSuccess(Free)
      .addError(ConflictWire)
      .annotate(OpenApi.Summary, "Deny a held action")
      .annotate(
        OpenApi.Description,
        "Refuses a held action; the agent waiting on the hold is answered block. A hold already decided or expired answers 409."
      )
  )
  .add(
    HttpApiEndpoint.get("listDecisions", "/enforcement/decisions")
      .setUrlParams(
        Schema.Struct({
          run_id: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
          limit: Schema.optionalWith(PageNumber(1, 500), { default: () => 100 })
        }).annotations(strict)
      )
      .addSuccess(Schema.Struct({ items: Schema.Array(Free) }))
      .annotate(OpenApi.Summary, "The enforcement decisions log, newest first")
      .annotate(
        OpenApi.Description,
        "The audit log of enforcement checks (verdict, matched guardrail, reason, latency), newest first, optionally for one run."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
