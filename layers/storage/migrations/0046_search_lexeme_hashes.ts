import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { lexemeHashesSql } from "../../search/Lexemes.ts"

// The search row's full-text vector as hashed lexemes (docs/search.md, "Index"; the figures in docs/performance.md,
// "Search index size"): `tsv` (a tsvector without positions, a 4-byte entry and the text of each lexeme) becomes
// `lexemes`, an int4[] of its lexemes' 32-bit hashes (layers/search/Lexemes.ts), 4 bytes a lexeme. The lexical leg
// asks only whether a span holds a lexeme (`@>`, `&&`) and how many distinct lexemes it holds (`cardinality`).
// - The GIN index on tsv is dropped first (the conversion would otherwise update it row by row); the GIN index on
//   lexemes is built once the rows are converted, with the smallest pending list (64 kB), as 0037 set for tsv.
// - Existing rows are converted in batches of BATCH rows in key order, each batch one statement that writes the
//   hashes and clears the vector (a row is in one layout or the other); `tsv` is dropped at the end (no rewrite: the
//   converted rows no longer hold it).
// Instances of the previous version write `tsv`: they must be stopped before this runs (docs/operations.md).
const BATCH = 5000

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX IF EXISTS span_embeddings_tsv`
  yield* sql`ALTER TABLE span_embeddings ADD COLUMN IF NOT EXISTS lexemes int4[], ALTER COLUMN tsv DROP NOT NULL`
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
        UPDATE span_embeddings e SET lexemes = ${sql.literal(lexemeHashesSql("e.tsv"))}, tsv = NULL
        FROM batch b WHERE e.trace_id = b.trace_id AND e.span_id = b.span_id AND e.tsv IS NOT NULL
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
  yield* sql`ALTER TABLE span_embeddings DROP COLUMN tsv, ALTER COLUMN lexemes SET NOT NULL`
  yield* sql`
    CREATE INDEX IF NOT EXISTS span_embeddings_lexemes ON span_embeddings USING gin (lexemes)
    WITH (gin_pending_list_limit = 64)`
})
