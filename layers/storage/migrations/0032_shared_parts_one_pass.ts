import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * tapedeck_share_parts (0030_shared_span_content) in one pass for the common case: the parts already stored are
 * found by one lookup, the missing ones inserted and their ids taken from the insert's RETURNING, so a model call
 * whose history is stored but for its last message costs one lookup and a one-row insert. The first version
 * checked every missing part against every part sent (quadratic in the parts of a payload) and looked all the parts
 * up a second time; it took about half of REST ingestion's time on the 30-step agent (pg_stat_user_functions).
 * Each part is looked up by its key (the LIMIT keeps the lateral lookup a nested loop: as a join, the planner hashed
 * all of the account's parts, a cost that grew with the account). Same contract: the ids in order; a part sent by hash only that is not stored is TD001; a part marked released is
 * unmarked; a part a concurrent writer inserted first, or the sweep deleted meanwhile, is found or stored by the
 * next round (each statement of a plpgsql function sees what committed before it started).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_share_parts(p_account uuid, p_parts text[], p_hashes text[] DEFAULT NULL)
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
        SELECT array_agg(c.id ORDER BY u.i), bool_or(c.id IS NULL), bool_or(c.id IS NULL AND u.t IS NULL),
               bool_or(c.orphaned_at IS NOT NULL)
        INTO ids, missing, textless, marked
        FROM unnest(hashes, p_parts) WITH ORDINALITY AS u(h, t, i)
        LEFT JOIN LATERAL (
          SELECT c.id, c.orphaned_at FROM span_contents c WHERE c.account_id = p_account AND c.hash = u.h LIMIT 1
        ) c ON true;
        IF NOT missing AND NOT marked THEN RETURN ids; END IF;
        -- a missing part whose text was sent with none of its occurrences in the payload
        IF textless AND EXISTS (
          SELECT 1 FROM unnest(ids, hashes, p_parts) AS u(id, h, t) WHERE u.id IS NULL
          GROUP BY u.h HAVING bool_and(u.t IS NULL)
        ) THEN
          RAISE EXCEPTION 'shared span content sent by hash only is not stored' USING ERRCODE = 'TD001';
        END IF;
        IF marked THEN
          UPDATE span_contents SET orphaned_at = NULL
          WHERE account_id = p_account AND id = ANY(ids) AND orphaned_at IS NOT NULL;
          -- looked up again: the sweep may have deleted a marked part before the update reached it
          CONTINUE;
        END IF;
        WITH ins AS (
          INSERT INTO span_contents (account_id, hash, body)
          SELECT DISTINCT ON (u.h) p_account, u.h, u.t FROM unnest(ids, hashes, p_parts) AS u(id, h, t)
          WHERE u.id IS NULL AND u.t IS NOT NULL
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
