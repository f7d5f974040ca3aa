import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// A statement that acts for an API key verified from this instance's cache, not read just now (the enforcement
// check: one round trip), calls this in the same statement: a key revoked meanwhile, on any instance, raises
// SQLSTATE TD401 and the whole statement, writes included, is undone. NULL means "verified just now".
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE FUNCTION tapedeck_require_live_key(hash text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
    BEGIN
      IF hash IS NULL OR EXISTS (SELECT 1 FROM api_keys WHERE key_hash = hash AND revoked_at IS NULL) THEN
        RETURN true;
      END IF;
      RAISE EXCEPTION 'the API key was revoked' USING ERRCODE = 'TD401';
    END $$`
})
