import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * What the trace listing filters on, kept on the trace row so that a filtered page is one index walk of `traces`:
 * `models`, the distinct models of the trace's spans (sorted), and `has_error`, whether a span recorded an error.
 * A filter on the spans themselves would join every candidate trace to its spans; these are written by the same
 * statements that write the span count and totals (SpanRecords.SPAN_TOTALS), so every write path keeps them.
 *
 * Indexes, all scoped to the account first so that one account's volume never slows another's listing:
 * - newest first within a status, a project, a session, and among traces with an error, for the filters that can
 *   be selective (a walk of the plain listing index would otherwise read a large account to fill a page);
 * - total cost and total duration, for minimums that only few traces reach;
 * - GIN on the models and on the name's trigrams (`name` contains, ignoring case), with the account id in the same
 *   index through btree_gin. pg_trgm and btree_gin are trusted extensions (PostgreSQL 13+) and ship with PGlite;
 *   where they cannot be created the models get an index of their own and names are matched without one.
 *
 * The values of stored traces are derived from their spans here (the SQL is written out, not shared, so that this
 * migration never changes with the code).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE traces
      ADD COLUMN models text[] NOT NULL DEFAULT '{}',
      ADD COLUMN has_error boolean NOT NULL DEFAULT false`
  yield* sql`
    UPDATE traces t SET models = agg.models, has_error = agg.has_error
    FROM (
      SELECT trace_id,
             COALESCE(array_agg(DISTINCT model ORDER BY model) FILTER (WHERE model IS NOT NULL), '{}'::text[]) AS models,
             COALESCE(bool_or(error IS NOT NULL OR span_type = 'error'), false) AS has_error
      FROM spans GROUP BY trace_id
    ) agg
    WHERE t.id = agg.trace_id AND (cardinality(agg.models) > 0 OR agg.has_error)`
  yield* sql`
    CREATE INDEX traces_status ON traces (account_id, environment, status, started_at DESC, id DESC)
    WHERE deleted_at IS NULL`
  yield* sql`
    CREATE INDEX traces_project ON traces (account_id, project_id, started_at DESC, id DESC)
    WHERE deleted_at IS NULL AND project_id IS NOT NULL`
  // Replaces (account_id, session_id): the sessions' reads use its prefix.
  yield* sql`DROP INDEX IF EXISTS traces_session`
  yield* sql`
    CREATE INDEX traces_session ON traces (account_id, session_id, started_at DESC, id DESC)
    WHERE session_id IS NOT NULL`
  yield* sql`
    CREATE INDEX traces_errors ON traces (account_id, environment, started_at DESC, id DESC)
    WHERE deleted_at IS NULL AND (has_error OR status = 'failed')`
  yield* sql`CREATE INDEX traces_cost ON traces (account_id, environment, total_cost) WHERE deleted_at IS NULL`
  yield* sql`CREATE INDEX traces_duration ON traces (account_id, environment, total_duration_ms) WHERE deleted_at IS NULL`
  yield* sql.unsafe(`DO $$ BEGIN
    CREATE EXTENSION IF NOT EXISTS btree_gin;
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX traces_models ON traces USING gin (account_id, models) WHERE deleted_at IS NULL;
    CREATE INDEX traces_name ON traces USING gin (account_id, name gin_trgm_ops) WHERE deleted_at IS NULL;
  EXCEPTION WHEN insufficient_privilege OR undefined_file OR feature_not_supported THEN
    CREATE INDEX traces_models ON traces USING gin (models) WHERE deleted_at IS NULL;
  END $$`)
})
