import { HttpServerRequest } from "@effect/platform"
import { Context, Effect, Layer, Option } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { InternalIdentity } from "#layers/auth/InternalIdentity"
import { missingCredentials, Unauthorized } from "../api/ApiErrors.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { ENFORCEMENT_CHECK_PATH } from "../api/EnforcementApi.ts"
import { TRACE_CREATE_PATH } from "../api/TracesApi.ts"
import { Authentication, LangfuseAuthentication } from "../api/Security.ts"

/**
 * The routes that may act for an API key verified from this instance's recent lookups, because their one statement
 * re-checks the key (`tapedeck_require_live_key`): the enforcement check (one round trip per check) and the trace
 * create (the hot write of ingestion). Every other route looks the key up.
 */
const CACHED_KEY_ROUTES: ReadonlySet<string> = new Set([ENFORCEMENT_CHECK_PATH, TRACE_CREATE_PATH])

const mayUseCachedKey = (request: HttpServerRequest.HttpServerRequest) => {
  if (request.method !== "POST") return false
  const q = request.url.indexOf("?")
  return CACHED_KEY_ROUTES.has(q < 0 ? request.url : request.url.slice(0, q))
}

/** The `x-service-key` and `Authorization: Bearer` scheme handlers, shared by both authentication middlewares. */
const headerSchemes = (credentials: Credentials) =>
  ({
    // An in-process identity (a background batch acting for its account) comes first: it has no header.
    // Every request with `x-service-key` comes here: one read of the context.
    serviceKey: (key) =>
      Effect.contextWithEffect((context: Context.Context<HttpServerRequest.HttpServerRequest>) => {
        const internal = Context.getOption(context, InternalIdentity)
        if (Option.isSome(internal)) return Effect.succeed(internal.value)
        const request = Context.get(context, HttpServerRequest.HttpServerRequest)
        return (mayUseCachedKey(request) ? credentials.cachedServiceKey(key) : credentials.serviceKey(key)).pipe(
          answerDomainErrors
        )
      }),
    bearer: (token) =>
      Effect.gen(function* () {
        // The platform strips the first seven characters whatever they are: insist they were "Bearer ".
        const request = yield* HttpServerRequest.HttpServerRequest
        if (!/^bearer /i.test(request.headers.authorization ?? "")) {
          return yield* missingCredentials()
        }
        return yield* (mayUseCachedKey(request) ? credentials.cachedBearer(token) : credentials.bearer(token)).pipe(
          answerDomainErrors
        )
      })
  }) satisfies Omit<Authentication["Type"], never>

/** Only authenticates: both scheme handlers resolve the credential to an account or refuse with 401. */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(Credentials, (credentials) => Authentication.of(headerSchemes(credentials)))
)

/**
 * The Langfuse SDKs' Basic scheme: the password (their "secret key") is a Tapedeck API key, looked up as
 * `x-service-key` is; the user name (their "public key") is not checked. Our own headers work here too.
 */
export const LangfuseAuthenticationLive = Layer.effect(
  LangfuseAuthentication,
  Effect.gen(function* () {
    const credentials = yield* Credentials
    return LangfuseAuthentication.of({
      ...headerSchemes(credentials),
      basic: ({ password }) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          if (!/^basic /i.test(request.headers.authorization ?? "")) {
            return yield* new Unauthorized({
              message: "missing or invalid credentials: send Authorization: Basic base64(publicKey:secretKey)"
            })
          }
          return yield* credentials.serviceKey(password).pipe(answerDomainErrors)
        })
    })
  })
)
