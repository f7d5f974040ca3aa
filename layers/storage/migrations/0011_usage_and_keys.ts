import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Monthly usage counters for what has no table of its own to count (OTLP requests, search queries, …):
  // one row per account, calendar month (UTC, "2026-11") and metric, incremented by an atomic upsert.
  yield* sql`
    CREATE TABLE usage_counters (
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      month text NOT NULL,
      metric text NOT NULL,
      value bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (account_id, month, metric)
    )`
  // Traces recorded in a month are counted by creation time.
  yield* sql`CREATE INDEX traces_account_created ON traces (account_id, created_at)`
  // A batch job's progress and per-operation results (GET /api/v1/jobs/{id}).
  yield* sql`ALTER TABLE jobs ADD COLUMN result jsonb`
  yield* sql`ALTER TABLE jobs ADD COLUMN progress_done integer`
  yield* sql`ALTER TABLE jobs ADD COLUMN progress_total integer`
})
