import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * A call's new shared parts are numbered in the order it first meets them: a span's references are stored as the
 * differences between consecutive ids (0047_refs_delta_text), and a model call's history is in the order its request
 * met its parts, so most differences become 1 (one character) instead of the tens that numbering in hash order
 * gave. The rows are still inserted in hash order. Otherwise 0045_packed_parts_sent's function.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
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
        -- The new parts are numbered in the order the call first meets them, and inserted in hash order (the order
        -- that keeps two writers of the same new parts from waiting on each other in a cycle).
        WITH fresh AS (
          SELECT u.h FROM unnest(ids, hashes, p_parts, p_packed) WITH ORDINALITY AS u(id, h, t, z, i)
          WHERE u.id IS NULL AND u.h IS NOT NULL
          GROUP BY u.h
          HAVING bool_or(u.t IS NOT NULL OR u.z IS NOT NULL)
          ORDER BY min(u.i)
        ), numbered AS MATERIALIZED (
          SELECT f.h, nextval('span_contents_id_seq') AS id FROM fresh f
        ), ins AS (
          INSERT INTO span_contents (id, account_id, hash, body, packed)
          SELECT DISTINCT ON (u.h) n.id, p_account, u.h, CASE WHEN u.z IS NULL THEN u.t END, u.z
          FROM unnest(hashes, p_parts, p_packed) AS u(h, t, z)
          JOIN numbered n ON n.h = u.h
          WHERE u.t IS NOT NULL OR u.z IS NOT NULL
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
