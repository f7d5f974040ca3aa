import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// Span embeddings at 2 bytes a component instead of 4 (the search index was the bulk of an agent trace's bytes on
// disk; docs/search.md, "Index"). With pgvector the column becomes `halfvec` (half precision; pgvector ≥ 0.7, else it
// stays `vector`); each embedder's HNSW index stays over `embedding::vector(N)` (half precision distances cost twice
// the CPU in PGlite's WASM build) and is dropped here, created again over the half values at start by
// SpanIndex.ensureIndex. Without pgvector it becomes `smallint[]`: each component of the unit vector times
// 32767, rounded (VectorText.QUANTIZE_SCALE), which the exact re-rank divides back out. Both rewrite the table once.
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const column = yield* sql<{ type: string }>`
    SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute
    WHERE attrelid = 'span_embeddings'::regclass AND attname = 'embedding'`
  const type = column[0]?.type
  if (type === "vector") {
    const half = (yield* sql`SELECT 1 FROM pg_type WHERE typname = 'halfvec'`).length > 0
    if (!half) return
    const indexes = yield* sql<{ name: string }>`
      SELECT indexname AS name FROM pg_indexes
      WHERE tablename = 'span_embeddings' AND indexname LIKE 'span_embeddings\\_hnsw\\_%'`
    for (const { name } of indexes) yield* sql.unsafe(`DROP INDEX IF EXISTS "${name.replaceAll('"', '""')}"`)
    yield* sql`ALTER TABLE span_embeddings ALTER COLUMN embedding TYPE halfvec USING embedding::halfvec`
  } else if (type === "real[]") {
    yield* sql.unsafe(`
      CREATE OR REPLACE FUNCTION tapedeck_quantize_0036(v real[]) RETURNS smallint[] LANGUAGE sql IMMUTABLE AS $$
        SELECT COALESCE(array_agg(greatest(-32767, least(32767, round(x * 32767)))::smallint ORDER BY o), '{}')
        FROM unnest(v) WITH ORDINALITY AS u(x, o)
      $$`)
    yield* sql`ALTER TABLE span_embeddings ALTER COLUMN embedding TYPE smallint[] USING tapedeck_quantize_0036(embedding)`
    yield* sql`DROP FUNCTION tapedeck_quantize_0036(real[])`
  }
})
