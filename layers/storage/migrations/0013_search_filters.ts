import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// Search filters on the span-level fields, read from span_embeddings itself: the HNSW scan filters its rows as it
// goes (iterative scans), and a selective filter finds its few rows through these indexes for an exact scan,
// neither looking up each candidate's span. Written with the vector (SpanIndex.store) and re-synced by the index
// job when a span's fields change without its text (SpanIndex.syncFilters). Trace-level filters (status, project,
// deletion) change on the trace and stay a join on traces. duration_ms is the effective duration the filter
// compares: the span's own, else ended_at - started_at.
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE span_embeddings
      ADD COLUMN span_type text,
      ADD COLUMN model text,
      ADD COLUMN started_at timestamptz,
      ADD COLUMN cost numeric,
      ADD COLUMN duration_ms float8`
  yield* sql`
    UPDATE span_embeddings e SET
      span_type = s.span_type, model = s.model, started_at = s.started_at, cost = s.cost,
      duration_ms = COALESCE(s.duration_ms::float8, EXTRACT(EPOCH FROM (s.ended_at - s.started_at)) * 1000)
    FROM spans s WHERE s.trace_id = e.trace_id AND s.id = e.span_id`
  yield* sql`CREATE INDEX span_embeddings_started ON span_embeddings (account_id, started_at)`
  yield* sql`CREATE INDEX span_embeddings_model ON span_embeddings (account_id, model)`
  yield* sql`CREATE INDEX span_embeddings_span_type ON span_embeddings (account_id, span_type)`
  yield* sql`CREATE INDEX span_embeddings_cost ON span_embeddings (account_id, cost)`
  yield* sql`CREATE INDEX span_embeddings_duration ON span_embeddings (account_id, duration_ms)`
})
