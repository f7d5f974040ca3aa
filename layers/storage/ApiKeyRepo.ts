import { SqlClient, SqlError, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { type ApiKeySummary, displayPrefix, KEY_REVOKED_SQLSTATE } from "#src/domain/ApiKey"
import { CredentialRevoked } from "#src/domain/Errors"
import { AccountId } from "#src/domain/Ids"
import { InstantFromDate } from "#src/domain/Instant"
import { hashKey } from "../auth/KeyMaterial.ts"

const KeyOwner = Schema.Struct({ id: Schema.UUID, accountId: AccountId, stale: Schema.Boolean })

export const KeyListing = Schema.Struct({
  id: Schema.UUID,
  prefix: Schema.String,
  name: Schema.NullOr(Schema.String),
  createdAt: InstantFromDate,
  lastUsedAt: Schema.NullOr(InstantFromDate),
  revokedAt: Schema.NullOr(InstantFromDate)
})
export type KeyListing = typeof KeyListing.Type

/** A statement that acted for a cached API key found it revoked (`tapedeck_require_live_key`, migration 0014). */
export const isKeyRevoked = (e: unknown) =>
  e instanceof SqlError.SqlError && (e.cause as { readonly code?: unknown } | undefined)?.code === KEY_REVOKED_SQLSTATE

/**
 * For a write acting for a cached API key (`liveKey`): its statement found the key revoked, CredentialRevoked (the
 * statement, and its transaction, undone); any other database error is a defect.
 */
export const revokedOrDie = (e: SqlError.SqlError) =>
  isKeyRevoked(e) ? Effect.fail(new CredentialRevoked()) : Effect.die(e)

/** NOTIFY channel carrying the digest of each key revoked through the API (credential caches drop it). */
export const KEY_REVOKED_CHANNEL = "tapedeck_key_revoked"

const LIVE_KEY_COLUMNS = `id, name, prefix, created_at, last_used_at`

interface LiveKeyRow {
  readonly id: string
  readonly name: string | null
  readonly prefix: string
  readonly created_at: Date
  readonly last_used_at: Date | null
}

const toSummary = (row: LiveKeyRow): ApiKeySummary => ({
  id: row.id,
  name: row.name,
  prefix: row.prefix,
  createdAt: row.created_at.toISOString(),
  lastUsedAt: row.last_used_at === null ? null : row.last_used_at.toISOString()
})

/** API keys, stored as SHA-256 digests; the clear key exists only in the caller's hands. */
export class ApiKeyRepo extends Effect.Service<ApiKeyRepo>()("tapedeck/ApiKeyRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const ownerByHash = SqlSchema.findOne({
      Request: Schema.String,
      Result: KeyOwner,
      execute: (hash) =>
        sql`SELECT id, account_id AS "accountId",
                   (last_used_at IS NULL OR last_used_at < now() - interval '1 minute') AS stale
            FROM api_keys WHERE key_hash = ${hash} AND revoked_at IS NULL`
    })

    /** The id and account of the key with this SHA-256 digest (see hashKey), or none for an unknown or revoked key. */
    const authenticate = Effect.fn("ApiKeyRepo.authenticate")(
      function* (keyHash: string) {
        const found = yield* ownerByHash(keyHash)
        if (Option.isSome(found) && found.value.stale) {
          // Usage time is kept to the minute, off the request path.
          yield* Effect.forkDaemon(
            sql`UPDATE api_keys SET last_used_at = now() WHERE id = ${found.value.id}`.pipe(Effect.ignore)
          )
        }
        return Option.map(found, ({ accountId, id }) => ({ accountId, keyId: id }))
      },
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })
    )

    /** The account a live key belongs to, without recording a use. */
    const owner = Effect.fn("ApiKeyRepo.owner")(
      function* (key: string) {
        return Option.map(yield* ownerByHash(yield* hashKey(key)), (row) => row.accountId)
      },
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })
    )

    /** Stores a key for the account; false when that exact key is already stored (for any account). */
    const insert = Effect.fn("ApiKeyRepo.insert")(
      function* (accountId: AccountId, key: string, name: string | null) {
        const rows = yield* sql`
          INSERT INTO api_keys (id, account_id, prefix, key_hash, name)
          VALUES (${crypto.randomUUID()}, ${accountId}, ${displayPrefix(key)}, ${yield* hashKey(key)}, ${name})
          ON CONFLICT (key_hash) DO NOTHING
          RETURNING id`
        return rows.length > 0
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const listByAccount = Effect.fn("ApiKeyRepo.listByAccount")(
      function* (accountId: AccountId) {
        return yield* SqlSchema.findAll({
          Request: AccountId,
          Result: KeyListing,
          execute: (id) =>
            sql`SELECT id, prefix, name, created_at AS "createdAt", last_used_at AS "lastUsedAt",
                       revoked_at AS "revokedAt"
                FROM api_keys WHERE account_id = ${id} ORDER BY created_at, id`
        })(accountId)
      },
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })
    )

    /** Revokes the live keys shown with this prefix; the number revoked (0 when none matched). */
    const revokeByPrefix = Effect.fn("ApiKeyRepo.revokeByPrefix")(
      function* (prefix: string) {
        const rows = yield* sql`
          WITH revoked AS (
            UPDATE api_keys SET revoked_at = now()
            WHERE prefix = ${prefix} AND revoked_at IS NULL
            RETURNING id, key_hash
          )
          SELECT id, pg_notify(${KEY_REVOKED_CHANNEL}, key_hash) FROM revoked`
        return rows.length
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const countLiveWithPrefix = Effect.fn("ApiKeyRepo.countLiveWithPrefix")(
      function* (prefix: string) {
        const rows = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM api_keys WHERE prefix = ${prefix} AND revoked_at IS NULL`
        return rows[0]?.n ?? 0
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Stores a new key for the account unless it already holds `maxLive` live keys (then none). One statement:
     * the count and the insert see the same snapshot.
     */
    const insertLimited = Effect.fn("ApiKeyRepo.insertLimited")(
      function* (accountId: AccountId, key: string, name: string, maxLive: number) {
        const rows = yield* sql<LiveKeyRow>`
          INSERT INTO api_keys (id, account_id, prefix, key_hash, name)
          SELECT ${crypto.randomUUID()}, ${accountId}, ${displayPrefix(key)}, ${yield* hashKey(key)}, ${name}
          WHERE (SELECT count(*) FROM api_keys WHERE account_id = ${accountId} AND revoked_at IS NULL) < ${maxLive}
          RETURNING ${sql.literal(LIVE_KEY_COLUMNS)}`
        return Option.map(Option.fromNullable(rows[0]), toSummary)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The account's live keys, oldest first. */
    const listLive = Effect.fn("ApiKeyRepo.listLive")(
      function* (accountId: AccountId) {
        const rows = yield* sql<LiveKeyRow>`
          SELECT ${sql.literal(LIVE_KEY_COLUMNS)} FROM api_keys
          WHERE account_id = ${accountId} AND revoked_at IS NULL ORDER BY created_at, id`
        return rows.map(toSummary)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Revokes a live key of the account: its digest (to drop from credential caches), or none for a missing,
     * foreign or already revoked key. Every instance is told on channel KEY_REVOKED_CHANNEL (a no-op in PGlite).
     */
    const revokeOwned = Effect.fn("ApiKeyRepo.revokeOwned")(
      function* (accountId: AccountId, keyId: string) {
        const rows = yield* sql<{ key_hash: string }>`
          WITH revoked AS (
            UPDATE api_keys SET revoked_at = now()
            WHERE id = ${keyId} AND account_id = ${accountId} AND revoked_at IS NULL
            RETURNING key_hash
          )
          SELECT key_hash, pg_notify(${KEY_REVOKED_CHANNEL}, key_hash) FROM revoked`
        return Option.map(Option.fromNullable(rows[0]), (row) => row.key_hash)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Whether this key id is still live (a batch job re-checks the key that submitted it). */
    const isLive = Effect.fn("ApiKeyRepo.isLive")(
      function* (keyId: string) {
        const rows = yield* sql`SELECT 1 FROM api_keys WHERE id = ${keyId} AND revoked_at IS NULL`
        return rows.length > 0
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return {
      authenticate,
      owner,
      insert,
      listByAccount,
      revokeByPrefix,
      countLiveWithPrefix,
      insertLimited,
      listLive,
      revokeOwned,
      isLive
    } as const
  })
}) {}
