import type { HttpServerRequest } from "@effect/platform"
import { Option, Redacted } from "effect"
import type { Credentials } from "#layers/auth/Credentials"

/**
 * The credential a raw route's request carries in a header, as the API's security schemes read it:
 * `x-service-key`, else `Authorization: Bearer` (an API key or a JWT). None when neither is sent.
 */
export const headerCredential = (credentials: Credentials, request: HttpServerRequest.HttpServerRequest) => {
  const key = request.headers["x-service-key"]
  if (key) return Option.some(credentials.serviceKey(Redacted.make(key)))
  const authorization = request.headers.authorization ?? ""
  if (/^bearer /i.test(authorization)) return Option.some(credentials.bearer(Redacted.make(authorization.slice(7))))
  return Option.none()
}
