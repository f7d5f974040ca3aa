import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Parts sent compressed inside the `*_parts` text arrays (layers/traces/PartPacking.ts, `sentPart`): an element that
 * starts with \x02 is the part's packed bytes (0043_packed_parts) in base64, stored as `packed`. OTLP writes its spans
 * by COPY or by an upsert of records, whose parts the split trigger resolves (`tapedeck_share_parts` with the
 * `*_parts` and `*_hashes` columns): with this they are stored compressed, as the REST writes' parts are, and the
 * compression runs on the OTLP preparing thread. A part's text is JSON text, which never holds a raw control
 * character, so a plain part never starts with the mark. Such parts need their hashes given (the SHA-256 of their
 * text): computed here, the hash would be the mark's (TD002). Otherwise 0043_packed_parts's function.
 *
 * Parts stored plain before (OTLP's, the trigger's, REST's before 0043) are compressed in place in the background
 * (SharedContent.packBatch), in id order from the position recorded in `span_content_packing`, so a restart resumes
 * it; `done` once it reached the end.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE span_content_packing (
      singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
      last_id bigint NOT NULL DEFAULT 0,
      packed bigint NOT NULL DEFAULT 0,
      done boolean NOT NULL DEFAULT false
    )`
  yield* sql`INSERT INTO span_content_packing (done) SELECT NOT EXISTS (SELECT 1 FROM span_contents WHERE body IS NOT NULL)`
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_share_parts(p_account uuid, p_parts text[], p_hashes text[] DEFAULT NULL,
      p_packed bytea[] DEFAULT NULL)
    RETURNS bigint[] LANGUAGE plpgsql AS $$
    DECLARE
      hashes bytea[];
      ids bigint[];
      missing boolean;
      textless boolean;
      marked boolean;
    BEGIN
      IF p_packed IS NULL AND EXISTS (SELECT 1 FROM unnest(p_parts) AS t WHERE left(t, 1) = chr(2)) THEN
        IF p_hashes IS NULL OR cardinality(p_hashes) <> cardinality(p_parts) THEN
          RAISE EXCEPTION 'shared span content sent compressed without its hash' USING ERRCODE = 'TD002';
        END IF;
        p_packed := ARRAY(SELECT CASE WHEN left(t, 1) = chr(2) THEN decode(substr(t, 2), 'base64') END
                          FROM unnest(p_parts) WITH ORDINALITY AS u(t, i) ORDER BY i);
        p_parts := ARRAY(SELECT CASE WHEN left(t, 1) = chr(2) THEN NULL ELSE t END
                         FROM unnest(p_parts) WITH ORDINALITY AS u(t, i) ORDER BY i);
      END IF;
      hashes := CASE WHEN p_hashes IS NULL OR cardinality(p_hashes) <> cardinality(p_parts)
        THEN ARRAY(SELECT sha256(convert_to(t, 'UTF8')) FROM unnest(p_parts) AS t)
        ELSE ARRAY(SELECT decode(h, 'hex') FROM unnest(p_hashes) AS h) END;
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
