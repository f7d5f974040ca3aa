import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// A run's recent allowed actions (what the loop breaker and the rate policy look at) move out of the run's row into
// rows of their own. Kept in the row as a jsonb array, every batch that wrote a run rewrote the whole array (up to
// 5,000 actions, tens of KB compressed in TOAST) to add one or two: a busy run's statement cost grew with the run's
// age (about 1 ms of PostgreSQL per write at 500 actions, 3 ms at 1,000), and with few busy runs each run's checks
// wait for that statement one after the other. Now a write adds rows, numbered by the run's `actions` counter, and
// drops those past the last `p_max_recent`; the run's row keeps only counters, so its update costs the same at any age.
//
// - `tapedeck_run_actions_add`: appends a run's new actions (each may name its decision, so a fail-closed record can
//   take exactly that action back) after the `p_before` it had, and drops the ones older than the last `p_max_recent`.
// - `tapedeck_run_recent`: the run's last `p_max_recent` actions, oldest first, as the jsonb array the code reads.
// - `tapedeck_check_batch`: as in 0029, over those two.
// 0015's per-check functions (unused since 0020) read the old column and are dropped.
// Existing arrays are moved over; the `recent` column is dropped, so an instance of an older version fails its checks
// closed rather than counting against a column nobody reads.

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE enforcement_run_actions (
      account_id uuid NOT NULL,
      run_id text NOT NULL,
      seq bigint NOT NULL,
      decision_id uuid,
      tool text,
      args text,
      step bigint,
      at_ms float8 NOT NULL,
      PRIMARY KEY (account_id, run_id, seq)
    )`
  yield* sql`ALTER TABLE enforcement_runs ADD COLUMN actions bigint NOT NULL DEFAULT 0`
  yield* sql`
    INSERT INTO enforcement_run_actions (account_id, run_id, seq, tool, args, step, at_ms)
    SELECT r.account_id, r.run_id, e.n, e.v->>'tool', e.v->>'args', (e.v->>'step')::bigint, (e.v->>'atMs')::float8
    FROM enforcement_runs r, jsonb_array_elements(r.recent) WITH ORDINALITY AS e(v, n)`
  yield* sql`UPDATE enforcement_runs SET actions = jsonb_array_length(recent) WHERE jsonb_array_length(recent) > 0`
  yield* sql`ALTER TABLE enforcement_runs DROP COLUMN recent`
  // 0015's per-check functions, unused since 0020's batches, read that column.
  for (const name of ["tapedeck_check_allow_existing", "tapedeck_check_allow_new", "tapedeck_check_block"]) {
    yield* sql.unsafe(`DROP FUNCTION IF EXISTS ${name}`)
  }

  yield* sql.unsafe(`
  CREATE FUNCTION tapedeck_run_actions_add(p_account uuid, p_run text, p_before bigint, p_append jsonb,
                                           p_max_recent int)
  RETURNS void LANGUAGE plpgsql AS $$
  BEGIN
    INSERT INTO enforcement_run_actions (account_id, run_id, seq, decision_id, tool, args, step, at_ms)
    SELECT p_account, p_run, p_before + e.n, (e.v->>'id')::uuid, e.v->>'tool', e.v->>'args', (e.v->>'step')::bigint,
           (e.v->>'atMs')::float8
    FROM jsonb_array_elements(p_append) WITH ORDINALITY AS e(v, n);
    IF p_before + jsonb_array_length(p_append) > p_max_recent THEN
      DELETE FROM enforcement_run_actions a
      WHERE a.account_id = p_account AND a.run_id = p_run
        AND a.seq <= p_before + jsonb_array_length(p_append) - p_max_recent;
    END IF;
  END $$`)

  yield* sql.unsafe(`
  CREATE FUNCTION tapedeck_run_recent(p_account uuid, p_run text, p_max_recent int)
  RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT COALESCE(jsonb_agg(jsonb_build_object('tool', a.tool, 'args', a.args, 'step', a.step, 'atMs', a.at_ms)
                              ORDER BY a.seq), '[]'::jsonb)
    FROM (SELECT * FROM enforcement_run_actions a WHERE a.account_id = p_account AND a.run_id = p_run
          ORDER BY a.seq DESC LIMIT p_max_recent) a
  $$`)

  yield* sql.unsafe(`
  CREATE OR REPLACE FUNCTION tapedeck_check_batch(p_runs jsonb, p_decisions jsonb, p_keys text[], p_max_recent int)
  RETURNS TABLE (account_id uuid, run_id text, written boolean, spent_usd float8, tokens float8, recent jsonb,
                 version text, revoked text[])
  LANGUAGE plpgsql AS $$
  #variable_conflict use_column
  DECLARE
    x record;
    w record;
    dead text[];
    done_accounts uuid[] := '{}';
    done_runs text[] := '{}';
    ok boolean;
  BEGIN
    SELECT array_agg(k) INTO dead FROM unnest(p_keys) AS k
      WHERE NOT EXISTS (SELECT 1 FROM api_keys a WHERE a.key_hash = k AND a.revoked_at IS NULL);
    IF dead IS NOT NULL THEN
      RETURN QUERY SELECT NULL::uuid, NULL::text, false, NULL::float8, NULL::float8, NULL::jsonb, NULL::text, dead;
      RETURN;
    END IF;
    FOR x IN
      SELECT * FROM jsonb_to_recordset(p_runs) AS t(account_id uuid, run_id text, version text, usd jsonb, tokens bigint,
                                                    append jsonb)
      ORDER BY t.account_id, t.run_id
    LOOP
      IF jsonb_array_length(x.append) = 0 AND jsonb_array_length(x.usd) = 0 AND x.tokens = 0 THEN
        -- Nothing to add (every check of the run blocked): the run is left as it is, its version too (see 0029).
        SELECT r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.xmin::text AS version INTO w
          FROM enforcement_runs r WHERE r.account_id = x.account_id AND r.run_id = x.run_id;
        IF FOUND THEN
          ok := (w.version = x.version) IS TRUE;
        ELSE
          ok := x.version IS NULL;
          SELECT 0::float8 AS spent_usd, 0::float8 AS tokens, NULL::text AS version INTO w;
        END IF;
      ELSIF x.version IS NULL THEN
        INSERT INTO enforcement_runs AS r (account_id, run_id, spent_usd, tokens, actions)
        VALUES (x.account_id, x.run_id, (SELECT COALESCE(sum(v::numeric), 0) FROM jsonb_array_elements_text(x.usd) v),
                x.tokens, jsonb_array_length(x.append))
        ON CONFLICT (account_id, run_id) DO NOTHING
        RETURNING r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.xmin::text AS version,
                  r.actions AS actions INTO w;
        ok := FOUND;
      ELSE
        UPDATE enforcement_runs r SET
          spent_usd = r.spent_usd + (SELECT COALESCE(sum(v::numeric), 0) FROM jsonb_array_elements_text(x.usd) v),
          tokens = r.tokens + x.tokens,
          actions = r.actions + jsonb_array_length(x.append),
          updated_at = now()
        WHERE r.account_id = x.account_id AND r.run_id = x.run_id AND r.xmin::text = x.version
        RETURNING r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.xmin::text AS version,
                  r.actions AS actions INTO w;
        ok := FOUND;
      END IF;
      IF ok THEN
        IF jsonb_array_length(x.append) > 0 THEN
          PERFORM tapedeck_run_actions_add(x.account_id, x.run_id, w.actions - jsonb_array_length(x.append), x.append,
                                           p_max_recent);
        END IF;
        done_accounts := done_accounts || x.account_id;
        done_runs := done_runs || x.run_id;
        RETURN QUERY SELECT x.account_id, x.run_id, true, w.spent_usd, w.tokens, NULL::jsonb, w.version, NULL::text[];
      ELSE
        RETURN QUERY SELECT x.account_id, x.run_id, false, r.spent_usd::float8, r.tokens::float8,
                            tapedeck_run_recent(r.account_id, r.run_id, p_max_recent), r.xmin::text, NULL::text[]
          FROM enforcement_runs r WHERE r.account_id = x.account_id AND r.run_id = x.run_id;
      END IF;
    END LOOP;
    INSERT INTO enforcement_decisions
      (id, account_id, run_id, trace_id, step_index, tool_name, model, verdict, policy_id, policy_type, hold_id, reason,
       latency_ms)
    SELECT d.id, d.account_id, d.run_id, d.trace_id, d.step_index, d.tool_name, d.model, d.verdict, d.policy_id,
           d.policy_type, d.hold_id, d.reason,
           d.latency_ms + 1000 * extract(epoch FROM clock_timestamp() - statement_timestamp())::float8
    FROM jsonb_to_recordset(p_decisions) AS d(id uuid, account_id uuid, run_id text, trace_id uuid, step_index bigint,
                                               tool_name text, model text, verdict text, policy_id uuid, policy_type text,
                                               hold_id uuid, reason text, latency_ms float8)
    JOIN unnest(done_accounts, done_runs) AS k(account_id, run_id) ON k.account_id = d.account_id AND k.run_id = d.run_id
    ON CONFLICT (id) DO NOTHING;
  END $$`)
})
