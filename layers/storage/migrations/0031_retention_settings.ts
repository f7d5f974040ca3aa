import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Retention by age: how many days an account's traces are kept (NULL: the configured default), and per project
 * (NULL row absent: the account's). The purge finds expired traces of an account by its start time, hence the index.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE accounts ADD COLUMN retention_days integer CHECK (retention_days > 0)`
  yield* sql`
    CREATE TABLE project_retention (
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      project_id uuid NOT NULL,
      retention_days integer NOT NULL CHECK (retention_days > 0),
      PRIMARY KEY (account_id, project_id)
    )`
  yield* sql`CREATE INDEX traces_account_started ON traces (account_id, started_at)`
})
