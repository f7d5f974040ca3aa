import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// A smaller full-text index (docs/search.md, "Index"; the figures in docs/performance.md, "Search"):
// - Its pending list at its smallest, 64 kB instead of the server's 4 MB gin_pending_list_limit. New entries are
//   appended to the list uncompressed, one per lexeme and span, and merged into the index when it is full; the pages
//   the list held stay in the index file afterwards (about 4 MB whatever the number of spans). A short list is merged
//   more often, in smaller steps, and a lexical query (which scans the whole list) reads less of it.
// - The stored full-text vectors without positions (SpanIndex.store writes them so from now on): no query reads
//   positions (the lexical leg matches single lexemes, never phrases). Existing rows are stripped here in batches of
//   BATCH rows in key order, each its own statement.
const BATCH = 5000

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER INDEX span_embeddings_tsv SET (gin_pending_list_limit = 64)`
  let after: { trace_id: string; span_id: string } | undefined
  for (;;) {
    const rows: ReadonlyArray<{ trace_id: string | null; span_id: string | null; n: number }> = yield* sql<{
      trace_id: string | null
      span_id: string | null
      n: number
    }>`
      WITH batch AS (
        SELECT trace_id, span_id FROM span_embeddings
        ${after === undefined ? sql`` : sql`WHERE (trace_id, span_id) > (${after.trace_id}::uuid, ${after.span_id}::uuid)`}
        ORDER BY trace_id, span_id LIMIT ${BATCH}
      ), done AS (
        UPDATE span_embeddings e SET tsv = strip(e.tsv)
        FROM batch b WHERE e.trace_id = b.trace_id AND e.span_id = b.span_id
        RETURNING 1
      ), last AS (
        SELECT trace_id, span_id FROM batch ORDER BY trace_id DESC, span_id DESC LIMIT 1
      )
      SELECT (SELECT trace_id::text FROM last) AS trace_id, (SELECT span_id::text FROM last) AS span_id,
             (SELECT count(*)::int FROM batch) AS n`
    const row = rows[0]
    if (row === undefined || row.trace_id === null || row.span_id === null) break
    after = { trace_id: row.trace_id, span_id: row.span_id }
    if (row.n < BATCH) break
  }
})
