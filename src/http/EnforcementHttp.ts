import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Layer, Schema } from "effect"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { GuardrailRepo } from "#layers/enforcement/GuardrailRepo"
import { GuardrailTypes } from "#layers/extensions/GuardrailTypes"
import type { EnforcementCheckRequest } from "#src/domain/Enforcement"
import { isBuiltInPolicyType, PolicyParams } from "#src/domain/Guardrail"
import { ValidationFailed } from "../api/ApiErrors.ts"
import { apiWithGuardrailTypes } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"

/**
 * A check answered for the principal: the decision as raw JSON (EnforcementDecision has no transformation, so encoding
 * it would only copy it: docs/architecture.md, "SQL rows and raw responses"), a revoked key as its API error. The
 * HttpApi handler and the lean route (EnforcementCheckRoute) both answer through it.
 */
export const answerCheck = (
  enforcement: Enforcement,
  principal: CurrentPrincipal["Type"],
  payload: EnforcementCheckRequest
) =>
  enforcement.check(principal.accountId, payload, principal.liveKey ?? null).pipe(
    Effect.map((decision) => HttpServerResponse.unsafeJson(decision)),
    answerDomainErrors
  )

/** The guardrails routes over the contract with the installed guardrail types (their params checked as the built-ins'). */
const enforcementGroup = (types: typeof GuardrailTypes.Service) =>
  HttpApiBuilder.group(apiWithGuardrailTypes(types), "enforcement", (handlers) =>
    Effect.gen(function* () {
      const enforcement = yield* Enforcement
      const repo = yield* GuardrailRepo
      const paramsSchema = (type: string): Schema.Schema<unknown, unknown> | undefined =>
        isBuiltInPolicyType(type)
          ? (PolicyParams[type] as unknown as Schema.Schema<unknown, unknown>)
          : (types.find((t) => t.type === type)?.params as Schema.Schema<unknown, unknown> | undefined)
      /**
       * An installed type's params are stored in their encoded (JSON) form, which evaluation decodes again: the
       * request's params were decoded by the type's schema, so they are encoded back (the built-ins' are stored as
       * decoded, as they always were).
       */
      const storable = (type: string, params: unknown) => {
        if (isBuiltInPolicyType(type)) return Either.right(params)
        const schema = types.find((t) => t.type === type)?.params as Schema.Schema<unknown, unknown> | undefined
        if (schema === undefined) return Either.left(`no installed extension provides the guardrail type '${type}'`)
        return Either.mapLeft(Schema.encodeEither(schema)(params), (e) => e.message.slice(0, 300))
      }
      return (
        handlers
          // The hot route: no generator, no span of its own (see Enforcement). A request to exactly its path is
          // answered by the lean route in front of the router (EnforcementCheckRoute); this one answers the others
          // (batch operations, a path with a query string), the same way.
          .handle("check", ({ payload }) =>
            Effect.flatMap(CurrentPrincipal, (principal) => answerCheck(enforcement, principal, payload))
          )
          .handle("createGuardrail", ({ payload }) =>
            Effect.gen(function* () {
              const { accountId } = yield* CurrentPrincipal
              const params = storable(payload.type, payload.params)
              if (Either.isLeft(params)) {
                return yield* new ValidationFailed({ message: `params: ${params.left}` })
              }
              return yield* repo.create(accountId, { ...payload, params: params.right as typeof payload.params })
            })
          )
          .handle("listGuardrails", () =>
            Effect.gen(function* () {
              const { accountId } = yield* CurrentPrincipal
              return { items: yield* repo.list(accountId) }
            })
          )
          .handle("getGuardrail", ({ path }) =>
            Effect.gen(function* () {
              const { accountId } = yield* CurrentPrincipal
              return yield* repo.get(accountId, path.id)
            }).pipe(answerDomainErrors)
          )
          .handle("updateGuardrail", ({ path, payload }) =>
            Effect.gen(function* () {
              const { accountId } = yield* CurrentPrincipal
              const current = yield* repo.get(accountId, path.id)
              let params: unknown = undefined
              if (payload.params !== undefined) {
                const schema = paramsSchema(current.type)
                if (schema === undefined) {
                  return yield* new ValidationFailed({
                    message: `params: no installed extension provides the guardrail type '${current.type}'`
                  })
                }
                const checked = Schema.decodeUnknownEither(schema)(payload.params, { onExcessProperty: "error" })
                if (Either.isLeft(checked)) {
                  return yield* new ValidationFailed({
                    message: `params: not valid for a ${current.type} policy: ${checked.left.message.slice(0, 300)}`
                  })
                }
                const stored = storable(current.type, checked.right)
                if (Either.isLeft(stored)) {
                  return yield* new ValidationFailed({
                    message: `params: not valid for a ${current.type} policy: ${stored.left}`
                  })
                }
                params = stored.right
              }
              return yield* repo.update(accountId, path.id, { name: payload.name, enabled: payload.enabled, params })
            }).pipe(answerDomainErrors)
          )
          .handle("deleteGuardrail", ({ path }) =>
            Effect.gen(function* () {
              const { accountId } = yield* CurrentPrincipal
              yield* repo.remove(accountId, path.id)
              return { deleted: true as const }
            }).pipe(answerDomainErrors)
          )
          .handle("listHolds", ({ urlParams }) =>
            Effect.gen(function* () {
              const { accountId } = yield* CurrentPrincipal
              return { items: yield* repo.holds(accountId, urlParams.status) }
            })
          )
          .handle("approveHold", ({ path, payload }) =>
            Effect.gen(function* () {
              const { accountId, credentialId } = yield* CurrentPrincipal
              return yield* repo.decideHold(accountId, path.holdId, "approved", credentialId, payload.reason ?? null)
            }).pipe(answerDomainErrors)
          )
          .handle("denyHold", ({ path, payload }) =>
            Effect.gen(function* () {
              const { accountId, credentialId } = yield* CurrentPrincipal
              return yield* repo.decideHold(accountId, path.holdId, "denied", credentialId, payload.reason ?? null)
            }).pipe(answerDomainErrors)
          )
          .handle("listDecisions", ({ urlParams }) =>
            Effect.gen(function* () {
              const { accountId } = yield* CurrentPrincipal
              return { items: yield* repo.decisions(accountId, urlParams.run_id, urlParams.limit) }
            })
          )
      )
    })
  )

export const EnforcementHttpLive = Layer.unwrapEffect(Effect.map(GuardrailTypes, enforcementGroup)).pipe(
  Layer.provide([Enforcement.Default, GuardrailRepo.Default])
)
