import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// A run's version becomes a value its writer chooses (`ver`, a UUID) instead of the row's `xmin`, so that an instance
// can send a run's next batch while the previous one is still in flight: the next batch expects the version the
// previous one writes (known in process), PostgreSQL's row lock orders the two, and READ COMMITTED re-checks the
// expected version once the lock is free. A writer that names no version of its own (the locked path, taking back a
// fail-closed allow) gets a fresh random one from the trigger, so no expected version can ever match a row someone
// else wrote; a batch that failed leaves the row at the old version, so the batch sent after it fails its check too.
//
// The batch function is a new one (tapedeck_check_run_batch), not a replacement of 0029's tapedeck_check_batch:
// migrations land in any order (see Migrations.ts, runSkipped), and 0029 may run after this one. It is 0029's
// function with: `ver` as the version; each run's `next` version written by an insert or update; and, for a run sent
// behind a batch still in flight (`after`), the read of a run its checks only block takes the row's share lock, so
// that it waits for that batch and sees what it wrote.

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`ALTER TABLE enforcement_runs ADD COLUMN IF NOT EXISTS ver uuid NOT NULL DEFAULT gen_random_uuid()`)
  yield* sql.unsafe(`
  CREATE OR REPLACE FUNCTION tapedeck_enforcement_run_version() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    NEW.ver := gen_random_uuid();
    RETURN NEW;
  END $$`)
  yield* sql.unsafe(`DROP TRIGGER IF EXISTS tapedeck_enforcement_run_version ON enforcement_runs`)
  yield* sql.unsafe(`
  CREATE TRIGGER tapedeck_enforcement_run_version BEFORE UPDATE ON enforcement_runs
    FOR EACH ROW WHEN (NEW.ver IS NOT DISTINCT FROM OLD.ver) EXECUTE FUNCTION tapedeck_enforcement_run_version()`)
  yield* sql.unsafe(`
  CREATE OR REPLACE FUNCTION tapedeck_check_run_batch(p_runs jsonb, p_decisions jsonb, p_keys text[], p_max_recent int)
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
      SELECT * FROM jsonb_to_recordset(p_runs) AS t(account_id uuid, run_id text, version text, next uuid, after boolean,
                                                    usd jsonb, tokens bigint, append jsonb)
      ORDER BY t.account_id, t.run_id
    LOOP
      IF jsonb_array_length(x.append) = 0 AND jsonb_array_length(x.usd) = 0 AND x.tokens = 0 THEN
        -- Nothing to add (every check of the run blocked): the run is left as it is, its version too. Its decisions
        -- stand if they were taken against the run as it is now: no row and none expected, or the row at that version.
        IF x.after IS TRUE THEN
          SELECT r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.ver::text AS version INTO w
            FROM enforcement_runs r WHERE r.account_id = x.account_id AND r.run_id = x.run_id FOR SHARE;
        ELSE
          SELECT r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.ver::text AS version INTO w
            FROM enforcement_runs r WHERE r.account_id = x.account_id AND r.run_id = x.run_id;
        END IF;
        IF FOUND THEN
          ok := (w.version = x.version) IS TRUE;
        ELSE
          ok := x.version IS NULL;
          SELECT 0::float8 AS spent_usd, 0::float8 AS tokens, NULL::text AS version INTO w;
        END IF;
      ELSIF x.version IS NULL THEN
        INSERT INTO enforcement_runs AS r (account_id, run_id, spent_usd, tokens, recent, ver)
        VALUES (x.account_id, x.run_id, (SELECT COALESCE(sum(v::numeric), 0) FROM jsonb_array_elements_text(x.usd) v),
                x.tokens, x.append, x.next)
        ON CONFLICT (account_id, run_id) DO NOTHING
        RETURNING r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.ver::text AS version INTO w;
        ok := FOUND;
      ELSE
        UPDATE enforcement_runs r SET
          spent_usd = r.spent_usd + (SELECT COALESCE(sum(v::numeric), 0) FROM jsonb_array_elements_text(x.usd) v),
          tokens = r.tokens + x.tokens,
          recent = CASE WHEN jsonb_array_length(r.recent) + jsonb_array_length(x.append) <= p_max_recent
            THEN r.recent || x.append
            ELSE jsonb_path_query_array(r.recent || x.append, ('$[last - ' || (p_max_recent - 1) || ' to last]')::jsonpath)
          END,
          ver = x.next,
          updated_at = now()
        WHERE r.account_id = x.account_id AND r.run_id = x.run_id AND r.ver::text = x.version
        RETURNING r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.ver::text AS version INTO w;
        ok := FOUND;
      END IF;
      IF ok THEN
        done_accounts := done_accounts || x.account_id;
        done_runs := done_runs || x.run_id;
        RETURN QUERY SELECT x.account_id, x.run_id, true, w.spent_usd, w.tokens, NULL::jsonb, w.version, NULL::text[];
      ELSE
        RETURN QUERY SELECT x.account_id, x.run_id, false, r.spent_usd::float8, r.tokens::float8, r.recent, r.ver::text,
                            NULL::text[]
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
