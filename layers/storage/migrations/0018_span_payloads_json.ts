import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

const PAYLOADS = ["input", "output", "metadata", "extra"]

/**
 * A span's payload columns become `json`: the text as written, checked but not converted. Spans are read far more
 * than their payloads are queried, and `jsonb` paid twice for what nothing here used (no containment queries, no
 * indexes on them): building the binary form on every write, printing it again on every read (the trace detail
 * query and COPY both gained; docs/performance.md, "Figures behind choices in the code"). Keys come back in the
 * order they were sent. Changing the type rewrites the table
 * and resets the columns' compression, so lz4 is set again where the server has it (as 0017 did; that block is
 * repeated here, not shared, so that neither migration changes if a helper does).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`ALTER TABLE spans ${PAYLOADS.map((c) => `ALTER COLUMN ${c} TYPE json USING ${c}::json`).join(", ")}`)
  yield* sql.unsafe(`DO $$ BEGIN
    EXECUTE 'ALTER TABLE spans ${PAYLOADS.map((c) => `ALTER COLUMN ${c} SET COMPRESSION lz4`).join(", ")}';
  EXCEPTION WHEN feature_not_supported OR syntax_error THEN NULL;
  END $$`)
})
