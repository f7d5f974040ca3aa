import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // The accounts someone is watching live, per instance. A write NOTIFYs only for these: a NOTIFY makes commits
  // take a database-wide lock held through the WAL flush, which would serialize every ingesting transaction.
  // Rows of an instance that died are pruned once they have not been refreshed for a while.
  yield* sql`
    CREATE TABLE stream_listeners (
      account_id uuid NOT NULL,
      instance_id uuid NOT NULL,
      refreshed_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_id, instance_id)
    )`
})
