import { Context, type Effect, type Option } from "effect"

/** Who a token names: an existing account (by name) and the subject within it (recorded as the credential). */
export interface AuthenticatedToken {
  readonly account: string
  readonly subject: string
}

/**
 * A team's own token verification (an extension): when installed it replaces API keys and JWTs on every
 * authenticated route and socket. `Option.none()` refuses the token (401); so does a failure, whose reason is logged.
 */
export interface TokenAuthenticator {
  readonly name: string
  readonly authenticate: (token: string) => Effect.Effect<Option.Option<AuthenticatedToken>, unknown>
}

/** The installed authenticator, if any (none: API keys and JWTs, docs/authentication.md). */
export class Authentication extends Context.Reference<Authentication>()("tapedeck/Authentication", {
  defaultValue: (): TokenAuthenticator | undefined => undefined
}) {}
