import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // SDK processes connected over GET /ws/v1/replay, on whichever instance holds their socket.
  yield* sql`
    CREATE TABLE sdk_connections (
      id uuid PRIMARY KEY,
      account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
      instance_id uuid NOT NULL,
      agents text[] NOT NULL DEFAULT '{}',
      connected_at timestamptz NOT NULL DEFAULT now(),
      last_seen_at timestamptz NOT NULL DEFAULT now(),
      closed_at timestamptz
    )`
  yield* sql`CREATE INDEX sdk_connections_live ON sdk_connections (account_id) WHERE closed_at IS NULL`
  // A replay command waits here until the instance holding the chosen connection sends it.
  yield* sql`
    CREATE TABLE replay_commands (
      execution_id uuid PRIMARY KEY REFERENCES replay_generations (execution_id) ON DELETE CASCADE,
      connection_id uuid NOT NULL,
      payload jsonb NOT NULL,
      status text NOT NULL CHECK (status IN ('pending', 'sent')),
      created_at timestamptz NOT NULL DEFAULT now(),
      sent_at timestamptz
    )`
  yield* sql`CREATE INDEX replay_commands_pending ON replay_commands (connection_id) WHERE status = 'pending'`
  yield* sql`ALTER TABLE replay_generations ADD COLUMN connection_id uuid`
})
