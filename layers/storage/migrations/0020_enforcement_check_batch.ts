import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// One statement for a batch of enforcement checks, several runs and several checks per run (layers/enforcement/
// CheckBatcher.ts forms the batches). Each run is written only if it is still the version the checks were evaluated
// against (xmin; NULL: the run has no row yet); a run that moved on is answered as it is now, and its checks are
// evaluated again. Runs are taken in key order, so concurrent batches (other instances) lock rows in one order.
// Each statement of a VOLATILE PL/pgSQL function takes its own snapshot: after an UPDATE found the row changed by a
// transaction it waited for, the SELECT that follows sees that transaction's row, so the retry is against the run's
// latest state (a single statement would answer the state before the wait and cost a second retry).
// Keys: the API keys the checks were verified with from a cache; if one was revoked meanwhile, nothing is written
// and the revoked ones are answered (one row, `revoked` set), so that the caller answers those checks 401.

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
  CREATE FUNCTION tapedeck_check_batch(p_runs jsonb, p_decisions jsonb, p_keys text[], p_max_recent int)
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
      IF x.version IS NULL THEN
        INSERT INTO enforcement_runs AS r (account_id, run_id, spent_usd, tokens, recent)
        VALUES (x.account_id, x.run_id, (SELECT COALESCE(sum(v::numeric), 0) FROM jsonb_array_elements_text(x.usd) v),
                x.tokens, x.append)
        ON CONFLICT (account_id, run_id) DO NOTHING
        RETURNING r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.xmin::text AS version INTO w;
      ELSE
        UPDATE enforcement_runs r SET
          spent_usd = r.spent_usd + (SELECT COALESCE(sum(v::numeric), 0) FROM jsonb_array_elements_text(x.usd) v),
          tokens = r.tokens + x.tokens,
          recent = CASE WHEN jsonb_array_length(r.recent) + jsonb_array_length(x.append) <= p_max_recent
            THEN r.recent || x.append
            ELSE jsonb_path_query_array(r.recent || x.append, ('$[last - ' || (p_max_recent - 1) || ' to last]')::jsonpath)
          END,
          updated_at = now()
        WHERE r.account_id = x.account_id AND r.run_id = x.run_id AND r.xmin::text = x.version
        RETURNING r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.xmin::text AS version INTO w;
      END IF;
      IF FOUND THEN
        done_accounts := done_accounts || x.account_id;
        done_runs := done_runs || x.run_id;
        RETURN QUERY SELECT x.account_id, x.run_id, true, w.spent_usd, w.tokens, NULL::jsonb, w.version, NULL::text[];
      ELSE
        RETURN QUERY SELECT x.account_id, x.run_id, false, r.spent_usd::float8, r.tokens::float8, r.recent, r.xmin::text,
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
