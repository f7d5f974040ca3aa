import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// Span embeddings for POST /api/v1/search. With pgvector (embedded PGlite; PostgreSQL where the extension is
// installed) the vector is a `vector` (any dimension: the HNSW index is an expression index per embedder,
// created at start once the dimension is known); without it a `real[]`, searched exactly. The choice is made
// here, once, and read back from the catalog at start. `tsv` feeds the lexical leg of hybrid ranking.
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    DO $$ BEGIN
      IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        BEGIN
          CREATE EXTENSION IF NOT EXISTS vector;
        EXCEPTION WHEN OTHERS THEN
          RAISE NOTICE 'pgvector is available but could not be created (%): search uses the exact fallback', SQLERRM;
        END;
      END IF;
    END $$`)
  const vector = (yield* sql`SELECT 1 FROM pg_type WHERE typname = 'vector'`).length > 0
  yield* sql.unsafe(`
    CREATE TABLE span_embeddings (
      trace_id uuid NOT NULL,
      span_id uuid NOT NULL,
      account_id uuid NOT NULL,
      embedder text NOT NULL,
      dims integer NOT NULL,
      embedding ${vector ? "vector" : "real[]"} NOT NULL,
      text_hash text NOT NULL,
      tsv tsvector NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (trace_id, span_id)
    )`)
  yield* sql`CREATE INDEX span_embeddings_account ON span_embeddings (account_id, embedder)`
  yield* sql`CREATE INDEX span_embeddings_tsv ON span_embeddings USING gin (tsv)`
})
