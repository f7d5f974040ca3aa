import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// The sign bits of each span's embedding (bit i set when component i is positive), written beside the vector by
// SpanIndex.store. Without pgvector, search orders the rows that pass the filters by the Hamming distance of these
// bits to the query's (bit_count of the XOR: a short bit string per row, no array to unnest) and re-ranks only the
// best few hundred by the exact cosine. With pgvector the column is written but unused (HNSW answers), and no index
// is built on it.
// Existing rows are backfilled here in batches of BATCH rows (each a bounded statement); a row written later by an
// older instance without the bits has NULL, which the search ranks first among the candidates so it is always
// re-ranked exactly rather than lost.
const BATCH = 5000

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE span_embeddings ADD COLUMN IF NOT EXISTS sign_bits bit varying`
  for (;;) {
    const updated = yield* sql<{ n: number }>`
      WITH batch AS (
        SELECT trace_id, span_id FROM span_embeddings WHERE sign_bits IS NULL LIMIT ${BATCH}
      ), done AS (
        UPDATE span_embeddings e SET sign_bits = COALESCE((
          SELECT string_agg(CASE WHEN x > 0 THEN '1' ELSE '0' END, '' ORDER BY o)
          FROM unnest(e.embedding::real[]) WITH ORDINALITY AS u(x, o)
        ), '')::bit varying
        FROM batch b WHERE e.trace_id = b.trace_id AND e.span_id = b.span_id
        RETURNING 1
      )
      SELECT count(*)::int AS n FROM done`
    if ((updated[0]?.n ?? 0) < BATCH) break
  }
  // Without pgvector (embedding is real[]): the prefilter reads every matching row's bits, and a span_embeddings row
  // is about a kilobyte inline (its vector is below the TOAST threshold), so a scan of the table reads them all.
  // This covering index holds just the bits and keys: an unfiltered search is an index-only scan of it.
  const column = yield* sql<{ type: string }>`
    SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute
    WHERE attrelid = 'span_embeddings'::regclass AND attname = 'embedding'`
  if (column[0]?.type === "real[]") {
    yield* sql`
      CREATE INDEX IF NOT EXISTS span_embeddings_sign_bits
      ON span_embeddings (account_id, embedder, dims) INCLUDE (trace_id, span_id, sign_bits)`
  }
})
