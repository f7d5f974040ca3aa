import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE forks (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      trace_id uuid NOT NULL,
      fork_point_span_id uuid NOT NULL,
      name text,
      description text,
      modified_input jsonb NOT NULL,
      mock_outputs jsonb,
      status text NOT NULL CHECK (status IN ('pending', 'replaying', 'completed', 'failed')),
      generation integer NOT NULL DEFAULT 0,
      execution_id uuid,
      result_trace_id uuid,
      mode text CHECK (mode IN ('sdk', 'server')),
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX forks_listing ON forks (account_id, created_at DESC, id DESC)`
  // One row per replay generation: its outcome and fidelity report, and whether it did model work (a
  // generation that failed before any does not spend the allowance).
  yield* sql`
    CREATE TABLE replay_generations (
      execution_id uuid PRIMARY KEY,
      fork_id uuid NOT NULL REFERENCES forks (id) ON DELETE CASCADE,
      account_id uuid NOT NULL,
      generation integer NOT NULL,
      mode text NOT NULL,
      status text NOT NULL CHECK (status IN ('replaying', 'completed', 'failed')),
      result_trace_id uuid NOT NULL,
      usage_month text NOT NULL,
      byte_replayed integer NOT NULL DEFAULT 0,
      faithful_reexec integer NOT NULL DEFAULT 0,
      fidelity_caveats jsonb NOT NULL DEFAULT '[]',
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      UNIQUE (fork_id, generation)
    )`
  // The monthly allowance: one counter row per account and calendar month (UTC), reserved atomically.
  yield* sql`
    CREATE TABLE replay_usage (
      account_id uuid NOT NULL,
      month text NOT NULL,
      used integer NOT NULL,
      PRIMARY KEY (account_id, month)
    )`
})
