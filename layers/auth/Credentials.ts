import { SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Option, Redacted, Schedule, Schema, Stream } from "effect"
import * as jose from "jose"
import { AccountName, KEY_PREFIX } from "#src/domain/ApiKey"
import type { AccountId } from "#src/domain/Ids"
import { AppConfig } from "../config/AppConfig.ts"
import { AccountRepo } from "../storage/AccountRepo.ts"
import { digestKey, hashKey } from "./KeyMaterial.ts"
import { ApiKeyRepo, KEY_REVOKED_CHANNEL } from "../storage/ApiKeyRepo.ts"
import { InvalidCredential } from "#src/domain/Errors"
import { Authentication } from "../extensions/Authentication.ts"

export interface Principal {
  readonly accountId: AccountId
  readonly credentialId: string
  /**
   * Set when the principal came from this instance's cache of recently verified API keys instead of a lookup
   * just now: the key's digest, which the request's own statement must find still live (see `cachedServiceKey`).
   */
  readonly liveKey?: string
}

const MAX_CREDENTIAL_LENGTH = 8192
/** How long a credential verified before a database outage stays usable during it. */
const OUTAGE_GRACE_MS = 5 * 60_000
/** How long an API key verified here may stand in for a lookup, for routes whose statement re-checks it. */
const CACHED_KEY_MS = 60_000
/** How many account names and ids an instance keeps (`knownAccounts`); past it, new ones are looked up each time. */
const MAX_KNOWN_ACCOUNTS = 10_000
const KNOWN_ACCOUNTS_REFRESH = Duration.minutes(1)

/** Turns an API key or a web-session JWT into the account it acts for. */
export class Credentials extends Effect.Service<Credentials>()("tapedeck/Credentials", {
  scoped: Effect.gen(function* () {
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

    // Account names and ids, as this instance has seen them. An account is never renamed or removed, so the pair
    // stays true: a JWT (verified by its signature alone) names its account by name, and with this map it needs no
    // lookup on the routes whose own statement does the work, nor during a database outage, where an enforcement
    // check then fails closed as one made with a cached API key does. Loaded at start and refreshed every minute
    // (accounts are few), and filled by every lookup.
    const knownAccounts = new Map<string, AccountId>()
    yield* accounts.list(MAX_KNOWN_ACCOUNTS).pipe(
      Effect.map((rows) => {
        for (const row of rows) knownAccounts.set(row.name, row.id)
      }),
      Effect.catchAllCause(() => Effect.void),
      Effect.repeat(Schedule.spaced(KNOWN_ACCOUNTS_REFRESH)),
      Effect.forkScoped
    )
    const accountNamed = (name: string) =>
      accounts.findByName(name).pipe(
        Effect.tap((id) =>
          Effect.sync(() => {
            if (Option.isSome(id) && knownAccounts.size < MAX_KNOWN_ACCOUNTS) knownAccounts.set(name, id.value)
          })
        ),
        Effect.catchAllDefect((defect) => {
          const known = knownAccounts.get(name)
          return defect instanceof SqlError.SqlError && known !== undefined
            ? Effect.succeed(Option.some(known))
            : Effect.die(defect)
        })
      )

    const apiKey = Effect.fn("Credentials.apiKey")(function* (key: string) {
      if (!key.startsWith(KEY_PREFIX) || key.length > MAX_CREDENTIAL_LENGTH) {
        return yield* new InvalidCredential({ reason: "invalid API key" })
      }
      const keyHash = yield* hashKey(key)
      const found = yield* duringOutage(`key:${keyHash}`, keys.authenticate(keyHash))
      if (Option.isNone(found)) return yield* new InvalidCredential({ reason: "invalid or revoked API key" })
      return { accountId: found.value.accountId, credentialId: `key:${found.value.keyId}` } satisfies Principal
    })

    /** `fromKnown`: take the account from `knownAccounts` when it is there (routes whose statement re-checks nothing else). */
    const jwt = Effect.fn("Credentials.jwt")(function* (token: string, fromKnown: boolean) {
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
      // `requiredClaims` only asks that sub be present: an empty or blank subject names nobody.
      if (
        typeof account !== "string" ||
        typeof sub !== "string" ||
        sub.trim() === "" ||
        !Schema.is(AccountName)(account)
      ) {
        return yield* new InvalidCredential({ reason: "token lacks a valid sub or account claim" })
      }
      const known = fromKnown ? knownAccounts.get(account) : undefined
      const accountId = known !== undefined ? Option.some(known) : yield* accountNamed(account)
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
      if (token.length > MAX_CREDENTIAL_LENGTH)
        return Effect.fail(new InvalidCredential({ reason: "invalid credential" }))
      return token.startsWith(KEY_PREFIX) ? apiKey(token) : jwt(token, false)
    }

    /**
     * An API key verified here in the last minute and not revoked since as far as this instance heard (revocations
     * reach every instance by NOTIFY, but a notice can be late): the principal carries the key's digest as
     * `liveKey`, and the caller must make its one statement refuse to act if the key is no longer live
     * (`tapedeck_require_live_key`). Anything else is looked up as usual.
     */
    const cachedApiKey = (key: string) =>
      // Every enforcement check comes here: plain code, no generator.
      Effect.suspend(
        (): Effect.Effect<
          Effect.Effect.Success<ReturnType<typeof apiKey>> | Required<Principal>,
          InvalidCredential
        > => {
          if (!key.startsWith(KEY_PREFIX) || key.length > MAX_CREDENTIAL_LENGTH) return apiKey(key)
          const keyHash = digestKey(key)
          const hit = recent.get(`key:${keyHash}`)
          if (hit === undefined || Date.now() - hit.at > CACHED_KEY_MS) return apiKey(key)
          const found = hit.value as Option.Option<{ readonly accountId: AccountId; readonly keyId: string }>
          if (Option.isNone(found)) return apiKey(key)
          return Effect.succeed({
            accountId: found.value.accountId,
            credentialId: `key:${found.value.keyId}`,
            liveKey: keyHash
          } satisfies Principal)
        }
      )

    /** `x-service-key`, for a route that re-checks the key in its own statement: see `cachedApiKey`. */
    const cachedServiceKey = (credential: Redacted.Redacted<string>) => {
      const key = Redacted.value(credential)
      return key === "" ? Effect.fail(new InvalidCredential({ reason: "missing credentials" })) : cachedApiKey(key)
    }

    /**
     * `Authorization: Bearer`, for a route that re-checks an API key in its own statement; a JWT is verified by its
     * signature and its account taken from `knownAccounts` when known there.
     */
    const cachedBearer = (credential: Redacted.Redacted<string>) => {
      const token = Redacted.value(credential)
      if (token === "" || token.length > MAX_CREDENTIAL_LENGTH) return bearer(credential)
      return token.startsWith(KEY_PREFIX) ? cachedApiKey(token) : jwt(token, true)
    }

    /** Drops a revoked key (by digest) from this instance's outage cache. */
    const forgetKey = (keyHash: string) => Effect.sync(() => void recent.delete(`key:${keyHash}`))

    const custom = yield* Authentication
    if (custom !== undefined) {
      /** An installed authenticator (an extension) verifies every credential: API keys and JWTs are not accepted. */
      const byExtension = (credential: Redacted.Redacted<string>) =>
        Effect.gen(function* () {
          const token = Redacted.value(credential)
          if (token === "") return yield* new InvalidCredential({ reason: "missing credentials" })
          if (token.length > MAX_CREDENTIAL_LENGTH)
            return yield* new InvalidCredential({ reason: "invalid credential" })
          const verified = yield* custom
            .authenticate(token)
            .pipe(
              Effect.catchAllCause((cause) =>
                Effect.logWarning(`authenticator ${JSON.stringify(custom.name)} failed`, cause).pipe(
                  Effect.zipRight(Effect.fail(new InvalidCredential({ reason: "invalid credential" })))
                )
              )
            )
          if (Option.isNone(verified)) return yield* new InvalidCredential({ reason: "invalid credential" })
          const accountId = yield* accountNamed(verified.value.account)
          if (Option.isNone(accountId)) return yield* new InvalidCredential({ reason: "invalid credential" })
          return {
            accountId: accountId.value,
            credentialId: `${custom.name}:${verified.value.subject}`
          } satisfies Principal
        })
      return {
        serviceKey: byExtension,
        bearer: byExtension,
        cachedServiceKey: byExtension,
        cachedBearer: byExtension,
        forgetKey
      } as const
    }
    return { serviceKey, bearer, cachedServiceKey, cachedBearer, forgetKey } as const
  }),
  dependencies: [AccountRepo.Default, ApiKeyRepo.Default, AppConfig.Default]
}) {}
