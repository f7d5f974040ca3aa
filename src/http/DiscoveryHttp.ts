import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Option } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { KEY_PREFIX } from "#src/domain/ApiKey"
import { NotFound } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"

const HOST = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/

/**
 * This server's base URL: TAPEDECK_PUBLIC_URL, else the request's Host (scheme from X-Forwarded-Proto when it
 * says http or https, else http). A malformed Host falls back to localhost rather than being echoed.
 */
const requestBase = (request: HttpServerRequest.HttpServerRequest) => {
  const host = request.headers.host ?? ""
  const forwarded = (request.headers["x-forwarded-proto"] ?? "").split(",")[0]!.trim().toLowerCase()
  const scheme = forwarded === "https" || forwarded === "http" ? forwarded : "http"
  return `${scheme}://${HOST.test(host) ? host : "localhost"}`
}

/** The base URL this server is reached at: TAPEDECK_PUBLIC_URL, else the one the request names (see requestBase). */
export const publicBase = (config: AppConfig, request: HttpServerRequest.HttpServerRequest) =>
  Option.getOrElse(config.publicUrl, () => requestBase(request))

/** Metadata only (no cache beyond an hour): keys and tokens are issued as docs/authentication.md says. */
const json = (body: unknown) =>
  HttpServerResponse.unsafeJson(body, { headers: { "cache-control": "public, max-age=3600" } })

export const DiscoveryHttpLive = HttpApiBuilder.group(TapedeckApi, "discovery", (handlers) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const base = Effect.map(HttpServerRequest.HttpServerRequest, (request) => publicBase(config, request))
    const authUrl = (self: string) => Option.getOrElse(config.authUrl, () => self)
    return handlers
      .handle("protectedResource", () =>
        Effect.gen(function* () {
          const self = yield* base
          return json({
            resource: self,
            authorization_servers: [authUrl(self)],
            bearer_methods_supported: ["header"],
            scopes_supported: [],
            resource_name: "Tapedeck API",
            resource_documentation: `${self}/docs`,
            // Tapedeck's own: how a credential is presented (either header suffices).
            tapedeck_api_key_header: "x-service-key",
            tapedeck_api_key_prefix: KEY_PREFIX,
            tapedeck_token_types_supported: Option.isSome(config.jwtSecret) ? ["api_key", "jwt"] : ["api_key"]
          })
        })
      )
      .handle("authorizationServer", () =>
        Effect.gen(function* () {
          const self = yield* base
          const issuer = authUrl(self)
          // Another authorization server publishes its own metadata: only this server's is served here.
          if (issuer !== self)
            return yield* new NotFound({ message: "the authorization server is at TAPEDECK_AUTH_URL" })
          return json({
            issuer,
            // Bearer tokens (API keys) are issued to an authenticated caller by POST /api/v1/api-keys; there is no
            // OAuth grant flow, so no grant or response type and no client authentication method is advertised.
            token_endpoint: `${issuer}/api/v1/api-keys`,
            response_types_supported: [],
            grant_types_supported: [],
            scopes_supported: [],
            token_endpoint_auth_methods_supported: [],
            service_documentation: `${self}/docs`,
            ...(Option.isSome(config.jwtSecret) ? { tapedeck_jwt_signing_alg_values_supported: ["HS256"] } : {})
          })
        })
      )
  })
)
