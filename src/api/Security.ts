import { HttpApiMiddleware, HttpApiSecurity } from "@effect/platform"
import { Context } from "effect"
import type { AccountId } from "../domain/Ids.ts"
import { RateLimitedWire, UnauthorizedWire } from "./ApiErrors.ts"

/** Who is calling: the account every read and write is scoped to, and the credential used. */
export class CurrentPrincipal extends Context.Tag("tapedeck/CurrentPrincipal")<
  CurrentPrincipal,
  {
    readonly accountId: AccountId
    readonly credentialId: string
    /** Only on the routes that may use a cached key (AuthenticationLive): its digest, to be re-checked by their statement. */
    readonly liveKey?: string
  }
>() {}

/** Either scheme suffices: `x-service-key: svc_…`, or `Authorization: Bearer <API key | JWT>`. */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("tapedeck/Authentication", {
  provides: CurrentPrincipal,
  failure: UnauthorizedWire,
  security: {
    serviceKey: HttpApiSecurity.apiKey({ in: "header", key: "x-service-key" }),
    bearer: HttpApiSecurity.bearer
  }
}) {}

/**
 * The Langfuse SDKs' scheme: `Authorization: Basic base64(publicKey:secretKey)`. The secret key is a Tapedeck API
 * key; the public key is not a credential (it names the sender, any value works). `x-service-key` and Bearer work too.
 */
export class LangfuseAuthentication extends HttpApiMiddleware.Tag<LangfuseAuthentication>()(
  "tapedeck/LangfuseAuthentication",
  {
    provides: CurrentPrincipal,
    failure: UnauthorizedWire,
    security: {
      basic: HttpApiSecurity.basic,
      serviceKey: HttpApiSecurity.apiKey({ in: "header", key: "x-service-key" }),
      bearer: HttpApiSecurity.bearer
    }
  }
) {}

/** Per credential and route. Declared before Authentication so that it runs inside it and sees the principal. */
export class RateLimit extends HttpApiMiddleware.Tag<RateLimit>()("tapedeck/RateLimit", {
  failure: RateLimitedWire
}) {}
