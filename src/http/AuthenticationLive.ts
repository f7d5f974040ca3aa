import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { InternalIdentity } from "#layers/auth/InternalIdentity"
import { Unauthorized } from "../api/ApiErrors.ts"
import { Authentication } from "../api/Security.ts"

const refuse = (e: { readonly reason: string }) => new Unauthorized({ message: e.reason })

/** Only authenticates: both scheme handlers resolve the credential to an account or refuse with 401. */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const credentials = yield* Credentials
    return Authentication.of({
      // An in-process identity (a background batch acting for its account) comes first: it has no header.
      serviceKey: (key) =>
        Effect.serviceOption(InternalIdentity).pipe(Effect.flatMap(Option.match({
          onSome: Effect.succeed,
          onNone: () => credentials.serviceKey(key).pipe(Effect.mapError(refuse))
        }))),
      bearer: (token) =>
        Effect.gen(function*() {
          // The platform strips the first seven characters whatever they are: insist they were "Bearer ".
          const request = yield* HttpServerRequest.HttpServerRequest
          if (!/^bearer /i.test(request.headers.authorization ?? "")) {
            return yield* new Unauthorized({ message: "missing or invalid credentials" })
          }
          return yield* credentials.bearer(token).pipe(Effect.mapError(refuse))
        })
    })
  })
)
