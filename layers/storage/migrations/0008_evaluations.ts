import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // criteria: [{name, description, weight}], immutable once created (no update route).
  yield* sql`
    CREATE TABLE evaluations (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      project_id uuid,
      name text NOT NULL,
      description text,
      judge_model text NOT NULL,
      criteria jsonb NOT NULL,
      is_public boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  yield* sql`
    CREATE INDEX evaluations_listing ON evaluations (account_id, created_at DESC, id DESC) WHERE deleted_at IS NULL`
  yield* sql`
    CREATE INDEX evaluations_public ON evaluations (created_at DESC, id DESC) WHERE is_public AND deleted_at IS NULL`
  // A run belongs to the account that asked for it (the trace's owner), which may not own a public evaluation.
  yield* sql`
    CREATE TABLE evaluation_runs (
      id uuid PRIMARY KEY,
      evaluation_id uuid NOT NULL REFERENCES evaluations (id) ON DELETE CASCADE,
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      trace_id uuid NOT NULL,
      judge_model text NOT NULL,
      rubric_version text NOT NULL,
      status text NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed')),
      score double precision CHECK (score >= 0 AND score <= 1),
      criterion_scores jsonb NOT NULL DEFAULT '[]',
      reasoning text,
      input_tokens bigint NOT NULL DEFAULT 0,
      output_tokens bigint NOT NULL DEFAULT 0,
      cost_usd double precision,
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      started_at timestamptz,
      completed_at timestamptz,
      CHECK ((status = 'completed') = (score IS NOT NULL))
    )`
  yield* sql`
    CREATE INDEX evaluation_runs_history ON evaluation_runs (evaluation_id, account_id, created_at DESC, id DESC)`
  yield* sql`
    CREATE INDEX evaluation_runs_reuse ON evaluation_runs (evaluation_id, trace_id, judge_model, completed_at DESC)
    WHERE status = 'completed'`
})
