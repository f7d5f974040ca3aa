import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE guardrails (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      project_id uuid,
      type text NOT NULL,
      name text,
      enabled boolean NOT NULL DEFAULT true,
      params jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  yield* sql`CREATE INDEX guardrails_account ON guardrails (account_id, created_at, id) WHERE deleted_at IS NULL`
  // A run's counters: one row per (account, run), locked for the duration of a check.
  yield* sql`
    CREATE TABLE enforcement_runs (
      account_id uuid NOT NULL,
      run_id text NOT NULL,
      spent_usd numeric NOT NULL DEFAULT 0,
      tokens bigint NOT NULL DEFAULT 0,
      recent jsonb NOT NULL DEFAULT '[]',
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_id, run_id)
    )`
  yield* sql`
    CREATE TABLE enforcement_holds (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL,
      policy_id uuid NOT NULL,
      run_id text NOT NULL,
      tool_name text,
      tool_args_hash text,
      model text,
      status text NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
      reason text,
      decided_by text,
      consumed boolean NOT NULL DEFAULT false,
      expires_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      decided_at timestamptz
    )`
  yield* sql`CREATE INDEX enforcement_holds_action ON enforcement_holds (account_id, run_id, policy_id, created_at DESC)`
  yield* sql`CREATE INDEX enforcement_holds_status ON enforcement_holds (account_id, status, created_at DESC)`
  yield* sql`
    CREATE TABLE enforcement_decisions (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL,
      run_id text NOT NULL,
      trace_id uuid,
      step_index bigint,
      tool_name text,
      model text,
      verdict text NOT NULL,
      policy_id uuid,
      policy_type text,
      hold_id uuid,
      reason text NOT NULL,
      latency_ms double precision NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX enforcement_decisions_run ON enforcement_decisions (account_id, run_id, created_at DESC)`
})
