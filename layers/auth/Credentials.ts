import { SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Option, Redacted, Schema, Stream } from "effect"
import * as jose from "jose"
import { AccountName, KEY_PREFIX } from "#src/domain/ApiKey"
import type { AccountId } from "#src/domain/Ids"
import { AppConfig } from "../config/AppConfig.ts"
import { AccountRepo } from "../storage/AccountRepo.ts"
import { hashKey } from "./KeyMaterial.ts"
import { ApiKeyRepo, KEY_REVOKED_CHANNEL } from "../storage/ApiKeyRepo.ts"

/** Why a credential was refused; the reason is safe to show (it never echoes the credential). */
export class InvalidCredential extends Schema.TaggedError<InvalidCredential>()("InvalidCredential", {
  reason: Schema.String
}) {}

export interface Principal {
  readonly accountId: AccountId
  readonly credentialId: string
}

const MAX_CREDENTIAL_LENGTH = 8192
/** How long a credential verified before a database outage stays usable during it. */
const OUTAGE_GRACE_MS = 5 * 60_000

/** Turns an API key or a web-session JWT into the account it acts for. */
export class Credentials extends Effect.Service<Credentials>()("tapedeck/Credentials", {
  scoped: Effect.gen(function*() {
    const config = yield* AppConfig
    const keys = yield* ApiKeyRepo
    const accounts = yield* AccountRepo
    const jwtKey = Option.map(config.jwtSecret, (secret) => new TextEncoder().encode(Redacted.value(secret)))

    // The last successful lookups, used only while the database cannot be reached: callers authenticated in the
    // last few minutes keep working through an outage (enforcement then fails closed instead of failing auth).
    const recent = new Map<string, { readonly value: unknown; readonly at: number }>()
    const remember = <A>(cacheKey: string, value: A) => {
      if (recent.size > 10_000) recent.clear()
      recent.set(cacheKey, { value, at: Date.now() })
      return value
    }
    // A key revoked anywhere leaves every instance's outage cache at once, so that not even a database outage
    // right after a revocation lets it back in (PGlite is one process: the revoking handler calls forgetKey).
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isSome(pg)) {
      yield* pg.value.listen(KEY_REVOKED_CHANNEL).pipe(
        Stream.runForEach((keyHash) => Effect.sync(() => recent.delete(`key:${keyHash}`))),
        Effect.catchAllCause((cause) => Effect.logWarning("key revocation listener stopped", cause)),
        Effect.forkScoped
      )
    }
    const duringOutage = <A, E, R>(cacheKey: string, lookup: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      lookup.pipe(
        Effect.map((value) => remember(cacheKey, value)),
        Effect.catchAllDefect((defect) => {
          const hit = recent.get(cacheKey)
          return defect instanceof SqlError.SqlError && hit !== undefined && Date.now() - hit.at < OUTAGE_GRACE_MS
            ? Effect.succeed(hit.value as A)
            : Effect.die(defect)
        })
      )

    const apiKey = Effect.fn("Credentials.apiKey")(function*(key: string) {
      if (!key.startsWith(KEY_PREFIX) || key.length > MAX_CREDENTIAL_LENGTH) {
        return yield* new InvalidCredential({ reason: "invalid API key" })
      }
      const keyHash = yield* hashKey(key)
      const found = yield* duringOutage(`key:${keyHash}`, keys.authenticate(keyHash))
      if (Option.isNone(found)) return yield* new InvalidCredential({ reason: "invalid or revoked API key" })
      return { accountId: found.value.accountId, credentialId: `key:${found.value.keyId}` } satisfies Principal
    })

    const jwt = Effect.fn("Credentials.jwt")(function*(token: string) {
      if (Option.isNone(jwtKey)) return yield* new InvalidCredential({ reason: "invalid credential" })
      const verified = yield* Effect.tryPromise({
        try: () =>
          jose.jwtVerify(token, jwtKey.value, {
            algorithms: ["HS256"],
            requiredClaims: ["sub", "exp"],
            ...Option.match(config.jwtIssuer, { onNone: () => ({}), onSome: (issuer) => ({ issuer }) }),
            ...Option.match(config.jwtAudience, { onNone: () => ({}), onSome: (audience) => ({ audience }) })
          }),
        catch: (e) =>
          new InvalidCredential({
            reason: e instanceof jose.errors.JWTExpired ? "token expired" : "invalid token"
          })
      })
      const { account, sub } = verified.payload
      if (typeof account !== "string" || typeof sub !== "string" || !Schema.is(AccountName)(account)) {
        return yield* new InvalidCredential({ reason: "token lacks a valid sub or account claim" })
      }
      const accountId = yield* duringOutage(`account:${account}`, accounts.findByName(account))
      if (Option.isNone(accountId)) return yield* new InvalidCredential({ reason: "unknown account" })
      return { accountId: accountId.value, credentialId: `jwt:${account}:${sub}` } satisfies Principal
    })

    /** `x-service-key`: an API key. */
    const serviceKey = (credential: Redacted.Redacted<string>) => {
      const key = Redacted.value(credential)
      return key === "" ? Effect.fail(new InvalidCredential({ reason: "missing credentials" })) : apiKey(key)
    }

    /** `Authorization: Bearer`: an API key or a JWT. */
    const bearer = (credential: Redacted.Redacted<string>) => {
      const token = Redacted.value(credential)
      if (token === "") return Effect.fail(new InvalidCredential({ reason: "missing or invalid credentials" }))
      if (token.length > MAX_CREDENTIAL_LENGTH) return Effect.fail(new InvalidCredential({ reason: "invalid credential" }))
      return token.startsWith(KEY_PREFIX) ? apiKey(token) : jwt(token)
    }

    /** Drops a revoked key (by digest) from this instance's outage cache. */
    const forgetKey = (keyHash: string) => Effect.sync(() => void recent.delete(`key:${keyHash}`))

    return { serviceKey, bearer, forgetKey } as const
  }),
  dependencies: [AccountRepo.Default, ApiKeyRepo.Default, AppConfig.Default]
}) {}
