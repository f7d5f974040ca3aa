import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { AccountInfo } from "../domain/Account.ts"
import { Authentication, RateLimit } from "./Security.ts"

/** Who the caller is: the account its API key or JWT acts for. */
export class AccountApi extends HttpApiGroup.make("account")
  .add(
    HttpApiEndpoint.get("get", "/account")
      .addSuccess(AccountInfo)
      .annotate(OpenApi.Summary, "The account the credential acts for (id and name), for API keys and JWTs alike")
      .annotate(
        OpenApi.Description,
        "Which account a credential belongs to: its id and name. Useful to check a key or a JWT before sending data, and to show the account in a client."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
