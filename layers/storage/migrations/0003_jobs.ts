import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE jobs (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      kind text NOT NULL,
      payload jsonb NOT NULL,
      status text NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'dead_letter')),
      attempts integer NOT NULL DEFAULT 0,
      max_attempts integer NOT NULL,
      run_at timestamptz NOT NULL DEFAULT now(),
      locked_until timestamptz,
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX jobs_ready ON jobs (run_at) WHERE status = 'queued'`
  yield* sql`CREATE INDEX jobs_leased ON jobs (locked_until) WHERE status = 'running'`
})
