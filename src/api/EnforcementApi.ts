import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Text } from "../domain/Json.ts"
import { EnforcementCheckRequest, EnforcementDecision } from "../domain/Enforcement.ts"
import { CreateGuardrailRequest, UpdateGuardrailRequest } from "../domain/Guardrail.ts"
import { DeleteResult } from "../domain/Trace.ts"
import { ConflictWire } from "./ApiErrors.ts"
import { Authentication, RateLimit } from "./Security.ts"
import { PageNumber } from "../domain/Page.ts"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

export const Guardrail = Schema.Struct({
  id: Schema.UUID,
  type: Schema.String,
  name: Schema.NullOr(Schema.String),
  projectId: Schema.NullOr(Schema.UUID),
  enabled: Schema.Boolean,
  params: Schema.Unknown,
  createdAt: Schema.String,
  updatedAt: Schema.String
}).annotations({ identifier: "Guardrail" })

const Free = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const IdPath = Schema.Struct({ id: Schema.UUID })
const HoldPath = Schema.Struct({ holdId: Schema.UUID })
const HoldDecision = Schema.Struct({ reason: Schema.optional(Text(2000)) })
  .annotations({ identifier: "HoldDecision", ...strict })

/** The check's full path (the group is mounted under /api/v1). */
export const ENFORCEMENT_CHECK_PATH = "/api/v1/enforcement/check"

export class EnforcementApi extends HttpApiGroup.make("enforcement")
  .add(
    HttpApiEndpoint.post("check", "/enforcement/check")
      .setPayload(EnforcementCheckRequest)
      .addSuccess(EnforcementDecision)
      .annotate(OpenApi.Summary, "Decide an action before it runs: allow, block or hold (fails closed)")
  )
  .add(HttpApiEndpoint.post("createGuardrail", "/guardrails").setPayload(CreateGuardrailRequest).addSuccess(Guardrail))
  .add(HttpApiEndpoint.get("listGuardrails", "/guardrails").addSuccess(Schema.Struct({ items: Schema.Array(Guardrail) })))
  .add(HttpApiEndpoint.get("getGuardrail", "/guardrails/:id").setPath(IdPath).addSuccess(Guardrail))
  .add(
    HttpApiEndpoint.patch("updateGuardrail", "/guardrails/:id").setPath(IdPath).setPayload(UpdateGuardrailRequest)
      .addSuccess(Guardrail)
  )
  .add(HttpApiEndpoint.del("deleteGuardrail", "/guardrails/:id").setPath(IdPath).addSuccess(DeleteResult))
  .add(
    HttpApiEndpoint.get("listHolds", "/enforcement/holds")
      .setUrlParams(Schema.Struct({ status: Schema.optional(Schema.Literal("pending", "approved", "denied", "expired")) }).annotations(strict))
      .addSuccess(Schema.Struct({ items: Schema.Array(Free) }))
  )
  .add(
    HttpApiEndpoint.post("approveHold", "/enforcement/holds/:holdId/approve").setPath(HoldPath).setPayload(HoldDecision)
      .addSuccess(Free).addError(ConflictWire)
  )
  .add(
    HttpApiEndpoint.post("denyHold", "/enforcement/holds/:holdId/deny").setPath(HoldPath).setPayload(HoldDecision)
      .addSuccess(Free).addError(ConflictWire)
  )
  .add(
    HttpApiEndpoint.get("listDecisions", "/enforcement/decisions")
      .setUrlParams(Schema.Struct({
        run_id: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
        limit: Schema.optionalWith(PageNumber(1, 500), { default: () => 100 })
      }).annotations(strict))
      .addSuccess(Schema.Struct({ items: Schema.Array(Free) }))
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
