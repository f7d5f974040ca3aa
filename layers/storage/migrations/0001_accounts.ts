import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE accounts (
      id uuid PRIMARY KEY,
      name text NOT NULL UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  // Keys are stored as a SHA-256 digest only; the prefix is what people see in listings.
  yield* sql`
    CREATE TABLE api_keys (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      prefix text NOT NULL,
      key_hash text NOT NULL UNIQUE,
      name text,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_used_at timestamptz,
      revoked_at timestamptz
    )`
  yield* sql`CREATE INDEX api_keys_account ON api_keys (account_id, created_at)`
  yield* sql`CREATE INDEX api_keys_prefix ON api_keys (prefix)`
})
