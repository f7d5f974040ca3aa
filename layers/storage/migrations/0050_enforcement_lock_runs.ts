import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * `tapedeck_lock_runs`: the first statement of a locked batch (SqlPolicyStore). A run that other instances write too
 * made every optimistic write of it fail on the row's version and go round again, racing the other instance each
 * time; a locked batch instead takes its runs' row locks first, then evaluates and writes them with
 * `tapedeck_check_batch` in the same transaction, so it never fails on a version.
 *
 * For each run of `p_runs` (`{account_id, run_id, version}`, the version this instance last saw or null), in key
 * order: locks the run's row, creating it empty when there is none, unless another transaction holds it (SKIP
 * LOCKED: that run is left out of this batch, and the caller queues its checks again). So a locked batch never waits
 * for one run while holding another, and batches of other runs never wait for each other. Only when every run is
 * held elsewhere does it wait, for the first one alone (holding nothing, it cannot be part of a cycle).
 *
 * Answers, for each run it locked, its counters and version and, when that version is not the one given (the
 * caller's copy is current otherwise), its recent actions: only those after the `actions` the caller gives (`full`
 * false: what others added since, to append to its copy), or all of them (`full` true) when the caller gives none or
 * an allow was taken back since (`taken_back`, a new column counting take-backs: they delete actions, which a copy
 * cannot learn from what was added). A hot run written by several instances thus costs each of its locked batches
 * the few actions added since, not the run's whole recent history. The actions are read by a statement of their own
 * once every lock is held, so they include whatever the writers waited for had added.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE enforcement_runs ADD COLUMN taken_back bigint NOT NULL DEFAULT 0`
  // A run's last `p_max_recent` actions after its `p_after`th (0: all), oldest first, as tapedeck_run_recent gives them.
  yield* sql.unsafe(`
  CREATE FUNCTION tapedeck_run_recent_after(p_account uuid, p_run text, p_after bigint, p_max_recent int)
  RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT COALESCE(jsonb_agg(jsonb_build_object('tool', a.tool, 'args', a.args, 'step', a.step, 'atMs', a.at_ms)
                              ORDER BY a.seq), '[]'::jsonb)
    FROM (SELECT * FROM enforcement_run_actions a
          WHERE a.account_id = p_account AND a.run_id = p_run AND a.seq > p_after
          ORDER BY a.seq DESC LIMIT p_max_recent) a
  $$`)
  yield* sql.unsafe(`
  CREATE FUNCTION tapedeck_lock_runs(p_runs jsonb, p_max_recent int)
  RETURNS TABLE (account_id uuid, run_id text, spent_usd float8, tokens float8, version text, actions bigint,
                 taken_back bigint, recent jsonb, full_recent boolean)
  LANGUAGE plpgsql AS $$
  #variable_conflict use_column
  DECLARE
    x record;
    first_account uuid;
    first_run text;
    got_accounts uuid[] := '{}';
    got_runs text[] := '{}';
  BEGIN
    FOR x IN
      SELECT * FROM jsonb_to_recordset(p_runs) AS t(account_id uuid, run_id text, version text)
      ORDER BY t.account_id, t.run_id
    LOOP
      IF first_run IS NULL THEN
        first_account := x.account_id;
        first_run := x.run_id;
      END IF;
      PERFORM 1 FROM enforcement_runs r WHERE r.account_id = x.account_id AND r.run_id = x.run_id
        FOR UPDATE SKIP LOCKED;
      IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM enforcement_runs r
                                   WHERE r.account_id = x.account_id AND r.run_id = x.run_id) THEN
        INSERT INTO enforcement_runs AS r (account_id, run_id) VALUES (x.account_id, x.run_id)
        ON CONFLICT (account_id, run_id) DO NOTHING;
        IF NOT FOUND THEN
          -- Created meanwhile by another writer, which has committed.
          PERFORM 1 FROM enforcement_runs r WHERE r.account_id = x.account_id AND r.run_id = x.run_id
            FOR UPDATE SKIP LOCKED;
        END IF;
      END IF;
      IF FOUND THEN
        got_accounts := got_accounts || x.account_id;
        got_runs := got_runs || x.run_id;
      END IF;
    END LOOP;
    IF cardinality(got_runs) = 0 AND first_run IS NOT NULL THEN
      PERFORM 1 FROM enforcement_runs r WHERE r.account_id = first_account AND r.run_id = first_run FOR UPDATE;
      IF FOUND THEN
        got_accounts := ARRAY[first_account];
        got_runs := ARRAY[first_run];
      END IF;
    END IF;
    RETURN QUERY
      SELECT r.account_id, r.run_id, r.spent_usd::float8, r.tokens::float8, r.xmin::text, r.actions, r.taken_back,
             CASE WHEN r.xmin::text IS DISTINCT FROM t.version
                  THEN tapedeck_run_recent_after(r.account_id, r.run_id, CASE WHEN d.delta THEN t.actions ELSE 0 END,
                                                 p_max_recent) END,
             NOT d.delta
      FROM jsonb_to_recordset(p_runs) AS t(account_id uuid, run_id text, version text, actions bigint,
                                            taken_back bigint)
      JOIN unnest(got_accounts, got_runs) AS g(account_id, run_id)
        ON g.account_id = t.account_id AND g.run_id = t.run_id
      JOIN enforcement_runs r ON r.account_id = t.account_id AND r.run_id = t.run_id
      CROSS JOIN LATERAL (SELECT t.actions IS NOT NULL AND t.taken_back = r.taken_back AND r.actions >= t.actions
                          AS delta) d;
  END $$`)
})
