import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // The live span stream's log: one row per write transaction and account, listing what changed (trace and
  // span ids with their event kinds, never payloads). Kept for a few minutes so reconnecting clients can
  // replay; subscribers read the current rows of traces and spans when they deliver.
  yield* sql`
    CREATE TABLE stream_events (
      id bigserial PRIMARY KEY,
      account_id uuid NOT NULL,
      groups jsonb NOT NULL,
      events integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX stream_events_account ON stream_events (account_id, id)`
  yield* sql`CREATE INDEX stream_events_created ON stream_events (created_at)`
})
