import { Schema } from "effect"
import { required } from "./Described.ts"
import { isStorableText } from "./Json.ts"
import { withExamples } from "./Examples.ts"

export const KEY_PREFIX = "svc_"

/** SQLSTATE raised by `tapedeck_require_live_key` (migration 0014) for a revoked key. */
export const KEY_REVOKED_SQLSTATE = "TD401"

/** The part of a key shown in listings: at most 8 characters after `svc_`, and never more than half of the rest. */
export const displayPrefix = (key: string) =>
  key.slice(0, KEY_PREFIX.length + Math.min(8, Math.floor((key.length - KEY_PREFIX.length) / 2)))

export const AccountName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, {
    message: () => "an account name is 1 to 100 letters, digits, '_', '.' or '-', starting with a letter or digit"
  })
)

/** `svc_` followed by at least 4 printable characters, no spaces or commas. */
export const ApiKeyText = Schema.String.pipe(
  Schema.pattern(/^svc_[\x21-\x2b\x2d-\x7e]{4,256}$/, {
    message: () => "an API key is 'svc_' followed by 4 to 256 printable characters (no spaces or commas)"
  })
)

/** Live keys an account may hold at once (POST /api/v1/api-keys refuses more). */
export const MAX_LIVE_KEYS_PER_ACCOUNT = 100

/** Body of POST /api/v1/api-keys (strict). */
export const CreateApiKeyRequest = withExamples(
  Schema.Struct({
    name: Schema.propertySignature(Schema.String.pipe(
      Schema.filter((s) => s.trim().length > 0 && s.length <= 100, {
        message: () => "name must be 1 to 100 characters, not only spaces"
      }),
      Schema.filter((s) => isStorableText(s) || "name must not contain NUL characters or unpaired surrogates")
    )).annotations({ description: "What the key is for (1 to 100 characters), shown in listings" })
  }).annotations({ identifier: "CreateApiKeyRequest", parseOptions: { onExcessProperty: "error" } }),
  { name: "ci-pipeline" }
)
export type CreateApiKeyRequest = typeof CreateApiKeyRequest.Type

/** A live key in listings: never the key nor its digest. */
export const ApiKeySummary = Schema.Struct({
  id: required(Schema.UUID, "The key's id (to revoke it)"),
  name: required(Schema.NullOr(Schema.String), "What the key is for, or null"),
  prefix: Schema.String.annotations({ description: "The key's first 12 characters, to recognise it" }),
  createdAt: required(Schema.String, "When it was created (ISO 8601)"),
  lastUsedAt: Schema.NullOr(Schema.String).annotations({ description: "Kept to the minute" })
}).annotations({ identifier: "ApiKeySummary" })
export type ApiKeySummary = typeof ApiKeySummary.Type

export const ApiKeyList = Schema.Struct({ items: required(Schema.Array(ApiKeySummary), "The account's live keys") }).annotations({ identifier: "ApiKeyList" })

/** POST /api/v1/api-keys: the new key in full, shown this once (only its SHA-256 digest is stored). */
export const CreatedApiKey = Schema.Struct({
  ...ApiKeySummary.fields,
  key: required(Schema.String, "The key itself, shown only this once: send it as x-service-key")
}).annotations({ identifier: "CreatedApiKey" })

export const ApiKeyPath = Schema.Struct({ keyId: Schema.UUID })

export const RevokedApiKey = Schema.Struct({
  id: required(Schema.UUID, "The revoked key's id"),
  revoked: required(Schema.Literal(true), "Always true: the key no longer authenticates")
}).annotations({ identifier: "RevokedApiKey" })
