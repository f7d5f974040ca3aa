import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Shared parts (0030_shared_span_content) can be stored compressed: `packed` holds a format byte and the part's text
 * as raw deflate (layers/traces/PartPacking.ts), and `body` is then NULL; exactly one of the two is set. PostgreSQL
 * compresses a row only once it is over ~2 kB (whatever toast_tuple_target says), and most parts are 0.3–2 kB, so they
 * were stored as they came. `packed` is stored as given (STORAGE EXTERNAL: compressing deflate again gains nothing).
 *
 * Writers that resolve parts in TypeScript (`withResolvedParts`) send new parts compressed; the split trigger and
 * the conversion of spans stored whole still store them plain (`body`), and readers take either. A part's hash is
 * still the SHA-256 of its text, so a part stored plain and the same part sent compressed are one part, and parts
 * stored before stay as they are.
 *
 * Payloads are put together in TypeScript only (SharedParts.withPayloads), which reads both columns: the SQL
 * functions that assembled them from `body` (`tapedeck_payload`, `tapedeck_payload_text`, `tapedeck_assemble`) would
 * read a compressed part as missing, and are dropped.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE span_contents ADD COLUMN packed bytea, ALTER COLUMN body DROP NOT NULL`
  yield* sql`ALTER TABLE span_contents ALTER COLUMN packed SET STORAGE EXTERNAL`
  yield* sql`ALTER TABLE span_contents ADD CONSTRAINT span_contents_one_form CHECK ((body IS NULL) <> (packed IS NULL))`
  yield* sql`DROP FUNCTION tapedeck_payload(json, text, bigint[])`
  yield* sql`DROP FUNCTION tapedeck_payload_text(json, text, bigint[])`
  yield* sql`DROP FUNCTION tapedeck_assemble(text, bigint[])`

  // 0040_release_parts_in_order's function, with the parts sent compressed (`p_packed`, NULL where sent as text or by
  // hash only) stored as such. Only writers that give the hashes send compressed parts.
  yield* sql`DROP FUNCTION tapedeck_share_parts(uuid, text[], text[])`
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_share_parts(p_account uuid, p_parts text[], p_hashes text[] DEFAULT NULL,
      p_packed bytea[] DEFAULT NULL)
    RETURNS bigint[] LANGUAGE plpgsql AS $$
    DECLARE
      hashes bytea[] := CASE WHEN p_hashes IS NULL OR cardinality(p_hashes) <> cardinality(p_parts)
        THEN ARRAY(SELECT sha256(convert_to(t, 'UTF8')) FROM unnest(p_parts) AS t)
        ELSE ARRAY(SELECT decode(h, 'hex') FROM unnest(p_hashes) AS h) END;
      ids bigint[];
      missing boolean;
      textless boolean;
      marked boolean;
    BEGIN
      LOOP
        SELECT array_agg(c.id ORDER BY u.i), bool_or(c.id IS NULL), bool_or(c.id IS NULL AND u.t IS NULL AND u.z IS NULL),
               bool_or(c.orphaned_at IS NOT NULL)
        INTO ids, missing, textless, marked
        FROM unnest(hashes, p_parts, p_packed) WITH ORDINALITY AS u(h, t, z, i)
        LEFT JOIN LATERAL (
          SELECT c.id, c.orphaned_at FROM span_contents c WHERE c.account_id = p_account AND c.hash = u.h LIMIT 1
        ) c ON true
        WHERE u.h IS NOT NULL;
        IF NOT missing AND NOT marked THEN RETURN ids; END IF;
        -- a missing part whose text was sent with none of its occurrences in the payload
        IF textless AND EXISTS (
          SELECT 1 FROM unnest(ids, hashes, p_parts, p_packed) AS u(id, h, t, z) WHERE u.id IS NULL AND u.h IS NOT NULL
          GROUP BY u.h HAVING bool_and(u.t IS NULL AND u.z IS NULL)
        ) THEN
          RAISE EXCEPTION 'shared span content sent by hash only is not stored' USING ERRCODE = 'TD001';
        END IF;
        IF marked THEN
          UPDATE span_contents SET orphaned_at = NULL
          WHERE id IN (
            SELECT c.id FROM span_contents c
            WHERE c.account_id = p_account AND c.id = ANY(ids) AND c.orphaned_at IS NOT NULL
            ORDER BY c.id
            FOR UPDATE OF c);
          -- looked up again: the sweep may have deleted a marked part before the update reached it
          CONTINUE;
        END IF;
        WITH ins AS (
          INSERT INTO span_contents (account_id, hash, body, packed)
          SELECT DISTINCT ON (u.h) p_account, u.h, CASE WHEN u.z IS NULL THEN u.t END, u.z
          FROM unnest(ids, hashes, p_parts, p_packed) AS u(id, h, t, z)
          WHERE u.id IS NULL AND u.h IS NOT NULL AND (u.t IS NOT NULL OR u.z IS NOT NULL)
          ORDER BY u.h
          ON CONFLICT (account_id, hash) DO NOTHING
          RETURNING id, hash
        )
        SELECT array_agg(COALESCE(u.id, r.id) ORDER BY u.i), bool_or(COALESCE(u.id, r.id) IS NULL)
        INTO ids, missing
        FROM unnest(ids, hashes) WITH ORDINALITY AS u(id, h, i) LEFT JOIN ins r ON r.hash = u.h;
        -- missing still: a concurrent writer inserted it first (found by the next round's lookup)
        IF NOT missing THEN RETURN ids; END IF;
      END LOOP;
    END $$`)
})
