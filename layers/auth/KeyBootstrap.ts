import { Console, Effect, Option, Redacted, Schema } from "effect"
import { AccountName, ApiKeyText } from "#src/domain/ApiKey"
import { AppConfig } from "../config/AppConfig.ts"
import { AccountRepo } from "../storage/AccountRepo.ts"
import { ApiKeyRepo } from "../storage/ApiKeyRepo.ts"
import { generateKey } from "./KeyMaterial.ts"
import { ApiKeysMisconfigured } from "#src/domain/Errors"

/** Parses `acme=svc_key1,globex=svc_key2` (whitespace around entries is ignored). */
export const parseApiKeys = (text: string) =>
  Effect.forEach(text.split(",").map((entry) => entry.trim()).filter((entry) => entry !== ""), (entry, i) => {
    const eq = entry.indexOf("=")
    const account = entry.slice(0, eq).trim()
    const key = entry.slice(eq + 1).trim()
    if (eq <= 0 || !Schema.is(AccountName)(account)) {
      return Effect.fail(new ApiKeysMisconfigured({ reason: `entry ${i + 1} is not account=svc_key` }))
    }
    if (!Schema.is(ApiKeyText)(key)) {
      return Effect.fail(
        new ApiKeysMisconfigured({ reason: `the key of account '${account}' must be 'svc_' and 4 to 256 printable characters` })
      )
    }
    return Effect.succeed({ account, key })
  })

/**
 * Start-up step after migrations: every configured account exists and each configured key is valid for it
 * (idempotent across restarts and instances). In embedded mode, with no keys configured and no account yet,
 * account `default` is created and its one key printed once.
 */
export const bootstrapKeys = Effect.gen(function*() {
  const config = yield* AppConfig
  const accounts = yield* AccountRepo
  const keys = yield* ApiKeyRepo
  const configured = yield* parseApiKeys(Redacted.value(config.apiKeys))
  for (const { account, key } of configured) {
    const accountId = yield* accounts.ensure(account)
    const inserted = yield* keys.insert(accountId, key, "TAPEDECK_API_KEYS")
    if (inserted) yield* Effect.logInfo("API key from TAPEDECK_API_KEYS stored").pipe(Effect.annotateLogs({ account }))
    const owner = yield* keys.owner(key)
    if (Option.isNone(owner)) {
      yield* Effect.logWarning("a key in TAPEDECK_API_KEYS was revoked; it stays refused").pipe(Effect.annotateLogs({ account }))
    } else if (owner.value !== accountId) {
      return yield* new ApiKeysMisconfigured({ reason: `the key given for account '${account}' already belongs to another account` })
    }
  }
  if (configured.length === 0 && Option.isNone(config.databaseUrl) && (yield* accounts.count()) === 0) {
    const accountId = yield* accounts.ensure("default")
    const key = yield* generateKey
    yield* keys.insert(accountId, key, "first start")
    yield* Console.log(
      [
        "",
        "Tapedeck created account 'default' with this API key (shown once; only its hash is stored):",
        "",
        `  ${key}`,
        "",
        `Use it as:  curl -H 'x-service-key: ${key}' http://localhost:${config.port}/api/v1/traces`,
        "More keys:  POST /api/v1/api-keys with this key, or (server stopped) npx bun run tapedeck keys create --account default",
        ""
      ].join("\n")
    )
  }
}).pipe(Effect.withSpan("KeyBootstrap.run"))
