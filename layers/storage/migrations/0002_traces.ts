import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Totals marked *_explicit were given by the client; the others are derived from the spans.
  // fork_id marks a fork's result trace (sandbox); the forks issue adds its table and the link.
  yield* sql`
    CREATE TABLE traces (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      project_id uuid,
      name text,
      status text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
      input jsonb,
      output jsonb,
      total_tokens bigint NOT NULL DEFAULT 0,
      total_cost numeric NOT NULL DEFAULT 0,
      total_duration_ms bigint NOT NULL DEFAULT 0,
      tokens_explicit boolean NOT NULL DEFAULT false,
      cost_explicit boolean NOT NULL DEFAULT false,
      duration_explicit boolean NOT NULL DEFAULT false,
      span_count integer NOT NULL DEFAULT 0,
      metadata jsonb,
      session_id text,
      lossy boolean,
      terminated_early boolean,
      environment text NOT NULL DEFAULT 'production' CHECK (environment IN ('production', 'sandbox')),
      fork_id uuid,
      started_at timestamptz NOT NULL,
      ended_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  yield* sql`
    CREATE INDEX traces_listing ON traces (account_id, environment, started_at DESC, id DESC)
    WHERE deleted_at IS NULL`
  yield* sql`CREATE INDEX traces_deleted ON traces (deleted_at) WHERE deleted_at IS NOT NULL`
  yield* sql`CREATE INDEX traces_session ON traces (account_id, session_id) WHERE session_id IS NOT NULL`
  // A span id is unique within its trace; trace ids are global, so (trace_id, id) never collides
  // across accounts. `extra` keeps the additional properties a client sent.
  yield* sql`
    CREATE TABLE spans (
      trace_id uuid NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
      id uuid NOT NULL,
      account_id uuid NOT NULL,
      parent_id uuid,
      span_type text NOT NULL,
      name text NOT NULL,
      model text,
      input jsonb,
      output jsonb,
      input_tokens bigint,
      output_tokens bigint,
      cost numeric,
      duration_ms bigint,
      metadata jsonb,
      agent_id text,
      parent_agent_id text,
      agent_role text,
      started_at timestamptz NOT NULL,
      ended_at timestamptz,
      error text,
      extra jsonb,
      PRIMARY KEY (trace_id, id)
    )`
  yield* sql`CREATE INDEX spans_account_started ON spans (account_id, started_at)`
})
