import { BunContext, BunRuntime } from "@effect/platform-bun"
import { Console, DateTime, Effect, Layer, Logger, LogLevel, Option, Schema } from "effect"
import { generateKey } from "#layers/auth/KeyMaterial"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { StorageLive } from "#layers/storage/Sql"
import { AccountName } from "./domain/ApiKey.ts"
import { gateMain } from "./GateCli.ts"

const USAGE = `usage:
  npx bun run tapedeck keys create --account NAME [--name LABEL]   create a key (printed once, as the last line)
  npx bun run tapedeck keys list --account NAME                    list the account's keys (prefixes only)
  npx bun run tapedeck keys revoke PREFIX                          revoke the key shown with this prefix
  npx bun run tapedeck gate --evaluation ID --traces ID1,ID2 [--threshold 0.7] [--url URL] [--key KEY]
                                                                   CI gate over HTTP (exit 0 pass, 1 fail, 2 error)

Storage: DATABASE_URL when set, else the embedded database in TAPEDECK_DATA_DIR (default ./.tapedeck),
which must not be in use by a running server.`

class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

const option = (args: ReadonlyArray<string>, name: string) => {
  const i = args.indexOf(name)
  return i >= 0 && i + 1 < args.length ? Option.some(args[i + 1]!) : Option.none()
}

const accountArg = (args: ReadonlyArray<string>) =>
  Option.match(option(args, "--account"), {
    onNone: () => Effect.fail(new UsageError({ message: "--account NAME is required" })),
    onSome: (name) =>
      Schema.is(AccountName)(name)
        ? Effect.succeed(name)
        : Effect.fail(new UsageError({ message: `'${name}' is not a valid account name` }))
  })

const create = (args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const account = yield* accountArg(args)
    const accounts = yield* AccountRepo
    const keys = yield* ApiKeyRepo
    const existed = Option.isSome(yield* accounts.findByName(account))
    const accountId = yield* accounts.ensure(account)
    if (!existed) yield* Console.error(`created account '${account}'`)
    const key = yield* generateKey
    yield* keys.insert(accountId, key, Option.getOrNull(option(args, "--name")))
    yield* Console.error(`new API key for '${account}' (shown once; only its hash is stored):`)
    yield* Console.log(key)
  })

const list = (args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const account = yield* accountArg(args)
    const accountId = yield* (yield* AccountRepo).findByName(account)
    if (Option.isNone(accountId)) return yield* new UsageError({ message: `no account named '${account}'` })
    const rows = yield* (yield* ApiKeyRepo).listByAccount(accountId.value)
    yield* Console.log(["PREFIX", "CREATED", "LAST USED", "STATUS", "NAME"].join("\t"))
    for (const row of rows) {
      yield* Console.log(
        [
          row.prefix,
          DateTime.formatIso(row.createdAt),
          row.lastUsedAt ? DateTime.formatIso(row.lastUsedAt) : "never",
          row.revokedAt ? `revoked ${DateTime.formatIso(row.revokedAt)}` : "active",
          row.name ?? ""
        ].join("\t")
      )
    }
  })

const revoke = (args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const prefix = args[0]
    if (prefix === undefined) return yield* new UsageError({ message: "PREFIX is required" })
    const keys = yield* ApiKeyRepo
    const live = yield* keys.countLiveWithPrefix(prefix)
    if (live === 0) return yield* new UsageError({ message: `no active key has the prefix '${prefix}'` })
    if (live > 1) {
      return yield* new UsageError({
        message: `${live} active keys share the prefix '${prefix}'; revoke by a longer one`
      })
    }
    yield* keys.revokeByPrefix(prefix)
    yield* Console.log(`revoked ${prefix}`)
  })

const command = (argv: ReadonlyArray<string>) => {
  const [group, verb, ...rest] = argv
  if (group !== "keys") return Effect.fail(new UsageError({ message: USAGE }))
  switch (verb) {
    case "create":
      return create(rest)
    case "list":
      return list(rest)
    case "revoke":
      return revoke(rest)
    default:
      return Effect.fail(new UsageError({ message: USAGE }))
  }
}

const ReposLive = Layer.mergeAll(AccountRepo.Default, ApiKeyRepo.Default).pipe(
  Layer.provide(StorageLive),
  Layer.provide(BunContext.layer)
)

// The gate is an HTTP client of a running server: it needs no storage.
if (process.argv[2] === "gate") {
  process.exitCode = await gateMain(process.argv.slice(3), process.env)
} else
  command(process.argv.slice(2)).pipe(
    Effect.provide(ReposLive),
    Effect.catchAll((e) =>
      Console.error(`tapedeck: ${e.message}`).pipe(Effect.zipRight(Effect.sync(() => (process.exitCode = 1))))
    ),
    Logger.withMinimumLogLevel(LogLevel.Warning),
    BunRuntime.runMain({ disablePrettyLogger: true })
  )
