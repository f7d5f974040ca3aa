import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // webhook_secret: `aesgcm:…` (sealed with TAPEDECK_WEBHOOK_SECRET_KEY) or `plain:…`; never returned after creation.
  yield* sql`
    CREATE TABLE eval_rules (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      evaluation_id uuid NOT NULL,
      name text,
      filter jsonb NOT NULL,
      sampling_rate double precision NOT NULL CHECK (sampling_rate >= 0 AND sampling_rate <= 1),
      webhook_url text,
      webhook_secret text,
      enabled boolean NOT NULL DEFAULT true,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  yield* sql`CREATE INDEX eval_rules_account ON eval_rules (account_id, created_at DESC, id DESC) WHERE deleted_at IS NULL`
  // A rule applies at most once to a trace: a retried terminal-trace job finds its decision here.
  yield* sql`
    CREATE TABLE eval_rule_matches (
      rule_id uuid NOT NULL,
      trace_id uuid NOT NULL,
      account_id uuid NOT NULL,
      sampled boolean NOT NULL,
      run_ids jsonb NOT NULL DEFAULT '[]',
      delivery_id uuid,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (rule_id, trace_id)
    )`
  yield* sql`
    CREATE TABLE insights (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL,
      trace_id uuid NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
      kind text NOT NULL,
      key text NOT NULL,
      severity text NOT NULL CHECK (severity IN ('low', 'medium', 'high')),
      message text NOT NULL,
      details jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (trace_id, kind, key)
    )`
  yield* sql`CREATE INDEX insights_account ON insights (account_id, created_at DESC, id DESC)`
  // One row per delivery attempt; delivery_id is the Tapedeck-Delivery header, stable across attempts.
  yield* sql`
    CREATE TABLE webhook_deliveries (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL,
      rule_id uuid NOT NULL,
      delivery_id uuid NOT NULL,
      trace_id uuid NOT NULL,
      event text NOT NULL,
      attempt integer NOT NULL,
      outcome text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'blocked', 'gave_up')),
      status_code integer,
      error text,
      duration_ms double precision,
      next_attempt_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX webhook_deliveries_rule ON webhook_deliveries (rule_id, created_at DESC, id DESC)`
})
