import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * A delete that defers the marking of the shared parts its spans referenced (`tapedeck.release_parts` set to
 * `deferred`, 0040_release_parts_in_order: the retention purge) records their ids in `span_contents_released`, in its
 * own transaction, instead of leaving them to its caller's memory. The parts were marked after the delete committed,
 * by the process that ran it: one that died in between (a crash, a kill, a deploy) left them unmarked for good, no
 * span referencing them and the sweep never seeing them. Now the ids commit with the delete, and any instance marks
 * them later (SharedContent.release drains the table, SKIP LOCKED, each batch one statement that marks the parts and
 * deletes their rows together). The delete still takes no lock on a part: it only inserts rows no one else holds.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE span_contents_released (
      id bigserial PRIMARY KEY,
      account_id uuid NOT NULL,
      part_id bigint NOT NULL,
      released_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_spans_release_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('tapedeck.release_parts', true) = 'deferred' THEN
        INSERT INTO span_contents_released (account_id, part_id)
        SELECT DISTINCT g.account_id, r.id FROM gone g
        CROSS JOIN LATERAL unnest(COALESCE(g.input_refs, '{}') || COALESCE(g.output_refs, '{}')) AS r(id)
        WHERE g.input_refs IS NOT NULL OR g.output_refs IS NOT NULL;
        RETURN NULL;
      END IF;
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
})
