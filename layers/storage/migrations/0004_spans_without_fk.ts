import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// The spans → traces foreign key cost a lookup and a row lock per inserted span (about a fifth of the
// database's work on ingest). Spans are only ever written through a statement that has the trace row
// (created in the same statement, or locked), and the retention purge removes a trace's spans with it.
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE spans DROP CONSTRAINT IF EXISTS spans_trace_id_fkey`
})
