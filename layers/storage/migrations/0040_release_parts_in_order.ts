import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Shared parts (0030_shared_span_content) are marked and unmarked with their rows locked in id order, and a
 * transaction can defer the marking of what its span deletes release (`tapedeck.release_parts` set to `deferred`).
 *
 * A writer unmarked the marked parts it uses with one UPDATE, locking them in whatever order the plan gave, while
 * the retention purge's delete marked the parts of the spans it removed in another order, holding them until its
 * batch committed: under ingestion the two deadlocked, and PostgreSQL aborted the writer (a 503). Now every
 * statement that locks several parts (the writer's unmark, the delete trigger's mark, the purge's release in
 * layers/storage/SharedContent.ts) locks them in ascending id order, so none waits on another in a cycle; the sweep
 * never waits (SKIP LOCKED). The retention purge defers the marking: its delete takes no lock on parts at all, and
 * it releases the parts afterwards in a short statement of its own, leaving out those recent spans still reference
 * (the system prompt and tool schemas every run reuses), which writers would otherwise have to unmark one after the
 * other after every batch.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_spans_release_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('tapedeck.release_parts', true) = 'deferred' THEN RETURN NULL; END IF;
      UPDATE span_contents SET orphaned_at = now()
      WHERE id IN (
        SELECT c.id FROM span_contents c
        WHERE c.orphaned_at IS NULL AND c.id IN (
          SELECT unnest(COALESCE(input_refs, '{}') || COALESCE(output_refs, '{}')) FROM gone
          WHERE input_refs IS NOT NULL OR output_refs IS NOT NULL)
        ORDER BY c.id
        FOR UPDATE OF c);
      RETURN NULL;
    END $$`)
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_spans_release_rewritten() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE span_contents SET orphaned_at = now()
      WHERE id IN (
        SELECT c.id FROM span_contents c
        WHERE c.orphaned_at IS NULL AND c.id IN (
          SELECT unnest(COALESCE(input_refs, '{}') || COALESCE(output_refs, '{}')) FROM gone
          WHERE input_refs IS NOT NULL OR output_refs IS NOT NULL
          EXCEPT
          SELECT unnest(COALESCE(input_refs, '{}') || COALESCE(output_refs, '{}')) FROM kept
          WHERE input_refs IS NOT NULL OR output_refs IS NOT NULL)
        ORDER BY c.id
        FOR UPDATE OF c);
      RETURN NULL;
    END $$`)
  // 0032_shared_parts_one_pass's function, with the unmark locking in id order.
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
          WHERE id IN (
            SELECT c.id FROM span_contents c
            WHERE c.account_id = p_account AND c.id = ANY(ids) AND c.orphaned_at IS NOT NULL
            ORDER BY c.id
            FOR UPDATE OF c);
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
