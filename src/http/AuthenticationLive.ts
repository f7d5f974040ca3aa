import { HttpServerRequest } from "@effect/platform"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { InternalIdentity } from "#layers/auth/InternalIdentity"
import { missingCredentials, Unauthorized } from "../api/ApiErrors.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { ENFORCEMENT_CHECK_PATH } from "../api/EnforcementApi.ts"
import { LANGFUSE_EXPORT_PATH, OTLP_EXPORT_PATH } from "../api/OtlpApi.ts"
import { TRACE_CREATE_PATH } from "../api/TracesApi.ts"
import { Authentication, LangfuseAuthentication } from "../api/Security.ts"

/**
 * The routes that may act for an API key verified from this instance's recent lookups, because their write
 * re-checks the key (`tapedeck_require_live_key`): the enforcement check (one round trip per check), the trace
 * create and the OTLP exports (the hot writes of ingestion). Every other route looks the key up.
 */
const CACHED_KEY_ROUTES: ReadonlySet<string> = new Set([
  ENFORCEMENT_CHECK_PATH,
  TRACE_CREATE_PATH,
  OTLP_EXPORT_PATH,
  LANGFUSE_EXPORT_PATH
])

const mayUseCachedKey = (request: HttpServerRequest.HttpServerRequest) => {
  if (request.method !== "POST") return false
  const q = request.url.indexOf("?")
  return CACHED_KEY_ROUTES.has(q < 0 ? request.url : request.url.slice(0, q))
}

/** The `x-service-key` scheme: the key looked up (or, on the routes that may, taken from the recent lookups). */
const serviceKeyScheme = (
  credentials: Credentials,
  request: HttpServerRequest.HttpServerRequest,
  key: Redacted.Redacted<string>
) =>
  (mayUseCachedKey(request) ? credentials.cachedServiceKey(key) : credentials.serviceKey(key)).pipe(answerDomainErrors)

/** The `Authorization: Bearer` scheme (an API key or a JWT). */
const bearerScheme = (
  credentials: Credentials,
  request: HttpServerRequest.HttpServerRequest,
  token: Redacted.Redacted<string>
) =>
  // The platform strips the first seven characters whatever they are: insist they were "Bearer ".
  !/^bearer /i.test(request.headers.authorization ?? "")
    ? missingCredentials()
    : (mayUseCachedKey(request) ? credentials.cachedBearer(token) : credentials.bearer(token)).pipe(answerDomainErrors)

/** The `x-service-key` and `Authorization: Bearer` scheme handlers, shared by both authentication middlewares. */
const headerSchemes = (credentials: Credentials) =>
  ({
    // An in-process identity (a background batch acting for its account) comes first: it has no header.
    // Every request with `x-service-key` comes here: one read of the context.
    serviceKey: (key) =>
      Effect.contextWithEffect((context: Context.Context<HttpServerRequest.HttpServerRequest>) => {
        const internal = Context.getOption(context, InternalIdentity)
        if (Option.isSome(internal)) return Effect.succeed(internal.value)
        return serviceKeyScheme(credentials, Context.get(context, HttpServerRequest.HttpServerRequest), key)
      }),
    bearer: (token) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => bearerScheme(credentials, request, token))
  }) satisfies Omit<Authentication["Type"], never>

const bearerPrefixLength = "Bearer ".length

/**
 * The Authentication middleware's answer for a request that reached the server (no in-process identity), read from
 * its headers as the framework tries the schemes: `x-service-key` (empty when absent) first, then the Bearer token;
 * when both fail, the Bearer scheme's error. For the enforcement check's lean route (EnforcementCheckRoute).
 */
export const authenticateHeaders = (credentials: Credentials, request: HttpServerRequest.HttpServerRequest) =>
  Effect.catchAll(serviceKeyScheme(credentials, request, Redacted.make(request.headers["x-service-key"] ?? "")), () =>
    bearerScheme(credentials, request, Redacted.make((request.headers.authorization ?? "").slice(bearerPrefixLength)))
  )

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
          return yield* serviceKeyScheme(credentials, request, password)
        })
    })
  })
)
