import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** The columns that can hold values large enough to be compressed (TOAST compresses a row's values over ~2 KB). */
const COLUMNS: Record<string, ReadonlyArray<string>> = {
  stream_events: ["groups"],
  spans: ["input", "output", "metadata", "extra", "error"],
  traces: ["input", "output", "metadata"],
  jobs: ["payload", "result", "error"]
}

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // lz4 compresses several times faster than the default pglz and decompresses faster too, which shows on the large
  // jsonb values written on every export, such as the stream row's span ids (docs/performance.md, "Figures behind
  // choices in the code"). Values already stored keep pglz (nothing is rewritten). PostgreSQL 14+
  // built with lz4 has it (Debian's, the pgvector image); elsewhere (PGlite, builds without lz4) the columns keep pglz.
  const statements = Object.entries(COLUMNS).map(([table, columns]) =>
    `ALTER TABLE ${table} ${columns.map((c) => `ALTER COLUMN ${c} SET COMPRESSION lz4`).join(", ")}`
  )
  yield* sql.unsafe(`DO $$ BEGIN
    ${statements.map((s) => `EXECUTE '${s}';`).join("\n    ")}
  EXCEPTION WHEN feature_not_supported OR syntax_error THEN NULL;
  END $$`)
})
