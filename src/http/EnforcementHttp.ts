import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Layer, Schema } from "effect"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { GuardrailRepo } from "#layers/enforcement/GuardrailRepo"
import { PolicyParams } from "#src/domain/Guardrail"
import { ValidationFailed } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const EnforcementHttpLive = HttpApiBuilder.group(TapedeckApi, "enforcement", (handlers) =>
  Effect.gen(function* () {
    const enforcement = yield* Enforcement
    const repo = yield* GuardrailRepo
    return (
      handlers
        // The hot route: no generator, no span of its own (see Enforcement). Answered raw: EnforcementDecision has no
        // transformation, so encoding it would only copy it (docs/architecture.md, "SQL rows and raw responses").
        .handle("check", ({ payload }) =>
          Effect.flatMap(CurrentPrincipal, ({ accountId, liveKey }) =>
            enforcement.check(accountId, payload, liveKey ?? null).pipe(
              Effect.map((decision) => HttpServerResponse.unsafeJson(decision)),
              answerDomainErrors
            )
          )
        )
        .handle("createGuardrail", ({ payload }) =>
          Effect.gen(function* () {
            const { accountId } = yield* CurrentPrincipal
            return yield* repo.create(accountId, payload)
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
              const schema = PolicyParams[current.type] as unknown as Schema.Schema<unknown, unknown>
              const checked = Schema.decodeUnknownEither(schema)(payload.params, { onExcessProperty: "error" })
              if (Either.isLeft(checked)) {
                return yield* new ValidationFailed({
                  message: `params: not valid for a ${current.type} policy: ${checked.left.message.slice(0, 300)}`
                })
              }
              params = checked.right
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
).pipe(Layer.provide([Enforcement.Default, GuardrailRepo.Default]))
