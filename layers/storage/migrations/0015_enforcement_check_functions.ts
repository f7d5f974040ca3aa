import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// The enforcement check's three optimistic statements as functions. Sent as text, each statement was parsed and
// planned on every check, most of the time PostgreSQL spent per check. PL/pgSQL prepares a function's query once
// per connection and reuses its plan. The statements are unchanged: a check writes only if the run is still the
// version it evaluated (xmin), records its decision with it, and answers the run's current row when it did not
// write; `tapedeck_require_live_key` (0014) undoes the statement when the caller's cached API key was revoked.
// Parameters 1–13 are the decision's record; `p_latency` is the time from the check's start to the statement's
// (the statement's own time is added).

const RECORD_PARAMS = `p_account uuid, p_run text, p_id uuid, p_trace uuid, p_step bigint, p_tool text, p_model text,
  p_verdict text, p_policy uuid, p_policy_type text, p_hold uuid, p_reason text, p_latency float8`
const RECORD_VALUES = `p_id, p_account, p_run, p_trace, p_step, p_tool, p_model, p_verdict, p_policy, p_policy_type,
  p_hold, p_reason, p_latency + 1000 * extract(epoch FROM clock_timestamp() - statement_timestamp())::float8`
const DECISION_COLUMNS =
  "(id, account_id, run_id, trace_id, step_index, tool_name, model, verdict, policy_id, policy_type, hold_id, reason, latency_ms)"
const RESULT = "TABLE (written boolean, spent_usd float8, tokens float8, recent jsonb, version text)"
const CURRENT = `cur AS (
  SELECT r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.recent, r.xmin::text AS version
  FROM enforcement_runs r WHERE r.account_id = p_account AND r.run_id = p_run)`
const ANSWER = `SELECT true, w.spent_usd, w.tokens, NULL::jsonb, w.version FROM w WHERE tapedeck_require_live_key(p_key)
  UNION ALL
  SELECT false, cur.spent_usd, cur.tokens, cur.recent, cur.version FROM cur WHERE NOT EXISTS (SELECT 1 FROM w)`

const fn = (name: string, params: string, body: string) => `
  CREATE FUNCTION ${name}(${params}) RETURNS ${RESULT} LANGUAGE plpgsql AS $$
  #variable_conflict use_column
  BEGIN
    RETURN QUERY ${body};
  END $$`

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Allow on a run at version p_version: the counters advance, `recent` keeps its last p_max_recent entries.
  yield* sql.unsafe(fn(
    "tapedeck_check_allow_existing",
    `${RECORD_PARAMS}, p_version text, p_usd numeric, p_tokens bigint, p_append jsonb, p_key text, p_max_recent int`,
    `WITH ${CURRENT},
    w AS (
      UPDATE enforcement_runs r SET spent_usd = r.spent_usd + p_usd, tokens = r.tokens + p_tokens,
        recent = CASE WHEN jsonb_array_length(r.recent) < p_max_recent THEN r.recent
          ELSE jsonb_path_query_array(r.recent, ('$[last - ' || (p_max_recent - 2) || ' to last]')::jsonpath) END || p_append,
        updated_at = now()
      WHERE r.account_id = p_account AND r.run_id = p_run AND r.xmin::text = p_version
      RETURNING r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.xmin::text AS version),
    d AS (INSERT INTO enforcement_decisions ${DECISION_COLUMNS} SELECT ${RECORD_VALUES} FROM w ON CONFLICT (id) DO NOTHING)
    ${ANSWER}`
  ))
  // Allow on a run not seen yet: its row is created with the counters, unless it exists by now.
  yield* sql.unsafe(fn(
    "tapedeck_check_allow_new",
    `${RECORD_PARAMS}, p_usd numeric, p_tokens bigint, p_recent jsonb, p_key text`,
    `WITH ${CURRENT},
    w AS (
      INSERT INTO enforcement_runs AS r (account_id, run_id, spent_usd, tokens, recent)
      VALUES (p_account, p_run, p_usd, p_tokens, p_recent)
      ON CONFLICT (account_id, run_id) DO NOTHING
      RETURNING r.spent_usd::float8 AS spent_usd, r.tokens::float8 AS tokens, r.xmin::text AS version),
    d AS (INSERT INTO enforcement_decisions ${DECISION_COLUMNS} SELECT ${RECORD_VALUES} FROM w ON CONFLICT (id) DO NOTHING)
    ${ANSWER}`
  ))
  // Block: only the record, and only if the run is still the version evaluated (NULL: no row yet).
  yield* sql.unsafe(fn(
    "tapedeck_check_block",
    `${RECORD_PARAMS}, p_version text, p_key text`,
    `WITH ${CURRENT},
    w AS (
      INSERT INTO enforcement_decisions ${DECISION_COLUMNS} SELECT ${RECORD_VALUES}
      WHERE CASE WHEN p_version IS NULL THEN NOT EXISTS (SELECT 1 FROM cur)
                 ELSE EXISTS (SELECT 1 FROM cur WHERE cur.version = p_version) END
      ON CONFLICT (id) DO NOTHING
      RETURNING NULL::float8 AS spent_usd, NULL::float8 AS tokens, NULL::text AS version)
    ${ANSWER}`
  ))
})
