import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * A span's references to shared parts (`input_refs`, `output_refs`, 0030_shared_span_content) stored as text: the
 * first id, then each later id as its difference from the one before, in decimal, comma-separated ("5123456,1,1,-40,2";
 * "" for an empty list; layers/traces/PartRefs.ts codes it in TypeScript). A model call references every shared part
 * of its history, and a trace's write numbers its parts in the order it first meets them, so a span's ids are mostly
 * ascending and close: about two bytes an id instead of eight, and no 24-byte array header.
 *
 * `tapedeck_refs(text)` decodes a list (a running sum of the differences), `tapedeck_refs_text(bigint[])` encodes
 * one. `tapedeck_span_refs(input_refs, output_refs)` gives the ids of both lists of a span as rows, for the readers
 * that take the references of many spans at once: the delete and rewrite triggers here, the sweep and the release
 * (layers/storage/SharedContent.ts). It is a set-returning SQL function the planner inlines into the query (called
 * in FROM), so it costs no function call a span: a purge batch's delete took 3× as long decoding through
 * `tapedeck_refs` (test/bench/purge-release.ts; docs/performance.md). Writers that resolve parts first
 * (`withResolvedParts`) send the text; the split trigger encodes the ids `tapedeck_share_parts` returns.
 *
 * Existing rows are converted in batches of BATCH spans in key order, each batch one statement that writes the new
 * columns and clears the old ones (a row is in one layout or the other, never half converted); the old columns are
 * dropped at the end and the new ones take their names. The split trigger names the columns in its condition
 * (0034_share_trigger_when) and the rewrite trigger would run for every batch: both are dropped first and created
 * again at the end. The functions replaced are otherwise those of 0030 (split), 0040 (rewrite) and 0042 (delete).
 *
 * A writer of the version before (an instance not yet replaced) sends the references as a bigint[], which PostgreSQL
 * casts to text on assignment ("{7,8}"): the split trigger also takes such rows (a reference list starting with "{")
 * and stores them coded, so no row holds a list `tapedeck_refs` cannot read.
 */
const BATCH = 5000
const SHARE_BYTES = 1024

/** 0030_shared_span_content's step of the split trigger, with the ids stored as text. */
const shareColumn = (column: "input" | "output") => `
      IF NEW.${column} IS NULL AND NEW.${column}_parts IS NOT NULL THEN
        NEW.${column}_refs := tapedeck_refs_text(tapedeck_share_parts(NEW.account_id, NEW.${column}_parts, NEW.${column}_hashes));
        NEW.${column}_parts := NULL;
        NEW.${column}_hashes := NULL;
      ELSIF NEW.${column} IS NOT NULL THEN
        NEW.${column}_skel := NULL;
        NEW.${column}_refs := NULL;
        NEW.${column}_parts := NULL;
        NEW.${column}_hashes := NULL;
        IF octet_length(NEW.${column}::text) >= ${SHARE_BYTES} THEN
          SELECT c.skel, c.parts INTO skel, parts FROM tapedeck_cut(NEW.${column}, 0, '', '{}') c;
          IF cardinality(parts) > 0 THEN
            NEW.${column} := NULL;
            NEW.${column}_skel := skel;
            NEW.${column}_refs := tapedeck_refs_text(tapedeck_share_parts(NEW.account_id, parts));
          END IF;
        END IF;
      END IF;
`

/** A reference list sent as a bigint[] by a writer of the version before (cast to text on assignment). */
const arrayRefs = (c: "input" | "output") => `left(NEW.${c}_refs, 1) = '{'`

/** 0034_share_trigger_when's condition (the rows the split trigger changes), and reference lists sent as arrays. */
const changes = (c: "input" | "output") => `${arrayRefs(c)} OR (NEW.${c} IS NULL AND NEW.${c}_parts IS NOT NULL)
  OR (NEW.${c} IS NOT NULL AND (NEW.${c}_skel IS NOT NULL OR NEW.${c}_refs IS NOT NULL OR NEW.${c}_parts IS NOT NULL
    OR NEW.${c}_hashes IS NOT NULL OR octet_length(NEW.${c}::text) >= ${SHARE_BYTES}))`

/** The ids both reference lists of a row of `from` (a table's alias) hold, as rows `r(id)` (for a LATERAL join). */
const refsOf = (from: string) => `tapedeck_span_refs(${from}.input_refs, ${from}.output_refs) AS r(id)`
const hasRefs = (from: string) => `(${from}.input_refs IS NOT NULL OR ${from}.output_refs IS NOT NULL)`

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // A sum in bigint arithmetic (sum(bigint) accumulates in numeric: the decode's running sum took half again as long).
  yield* sql.unsafe(`
    DO $$ BEGIN
      CREATE AGGREGATE tapedeck_int8_sum(bigint) (SFUNC = int8pl, STYPE = bigint, INITCOND = '0', PARALLEL = SAFE);
    EXCEPTION WHEN duplicate_function THEN NULL;
    END $$`)
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_refs(p_refs text) RETURNS bigint[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT CASE WHEN p_refs IS NULL THEN NULL ELSE ARRAY(
        SELECT tapedeck_int8_sum(u.d) OVER (ORDER BY u.o ROWS UNBOUNDED PRECEDING)
        FROM unnest(string_to_array(p_refs, ',')::bigint[]) WITH ORDINALITY AS u(d, o)
        ORDER BY u.o) END
    $$`)
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_refs_text(p_ids bigint[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT CASE WHEN p_ids IS NULL THEN NULL ELSE array_to_string(ARRAY(
        SELECT u.id - COALESCE(lag(u.id) OVER (ORDER BY u.o), 0)
        FROM unnest(p_ids) WITH ORDINALITY AS u(id, o)
        ORDER BY u.o), ',') END
    $$`)
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_span_refs(p_input text, p_output text) RETURNS SETOF bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
      SELECT tapedeck_int8_sum(a.d) OVER (ORDER BY a.o ROWS UNBOUNDED PRECEDING)
      FROM unnest(string_to_array(p_input, ',')::bigint[]) WITH ORDINALITY AS a(d, o)
      UNION ALL
      SELECT tapedeck_int8_sum(b.d) OVER (ORDER BY b.o ROWS UNBOUNDED PRECEDING)
      FROM unnest(string_to_array(p_output, ',')::bigint[]) WITH ORDINALITY AS b(d, o)
    $$`)

  const column = yield* sql<{ type: string }>`
    SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute
    WHERE attrelid = 'spans'::regclass AND attname = 'input_refs' AND NOT attisdropped`
  if (column[0]?.type === "bigint[]") {
    yield* sql`DROP TRIGGER IF EXISTS spans_share ON spans`
    yield* sql`DROP TRIGGER IF EXISTS spans_release_rewritten ON spans`
    yield* sql`ALTER TABLE spans ADD COLUMN IF NOT EXISTS input_refs_text text, ADD COLUMN IF NOT EXISTS output_refs_text text`
    let after: { trace_id: string; id: string } | undefined
    for (;;) {
      const rows: ReadonlyArray<{ trace_id: string | null; id: string | null; n: number }> = yield* sql<{
        trace_id: string | null
        id: string | null
        n: number
      }>`
        WITH batch AS (
          SELECT trace_id, id FROM spans
          ${after === undefined ? sql`` : sql`WHERE (trace_id, id) > (${after.trace_id}::uuid, ${after.id}::uuid)`}
          ORDER BY trace_id, id LIMIT ${BATCH}
        ), done AS (
          UPDATE spans s SET
            input_refs_text = tapedeck_refs_text(s.input_refs), input_refs = NULL,
            output_refs_text = tapedeck_refs_text(s.output_refs), output_refs = NULL
          FROM batch b
          WHERE s.trace_id = b.trace_id AND s.id = b.id AND (s.input_refs IS NOT NULL OR s.output_refs IS NOT NULL)
          RETURNING 1
        ), last AS (
          SELECT trace_id, id FROM batch ORDER BY trace_id DESC, id DESC LIMIT 1
        )
        SELECT (SELECT trace_id::text FROM last) AS trace_id, (SELECT id::text FROM last) AS id,
               (SELECT count(*)::int FROM batch) AS n`
      const row = rows[0]
      if (row === undefined || row.trace_id === null || row.id === null) break
      after = { trace_id: row.trace_id, id: row.id }
      if (row.n < BATCH) break
    }
    yield* sql`ALTER TABLE spans DROP COLUMN input_refs, DROP COLUMN output_refs`
    yield* sql`ALTER TABLE spans RENAME COLUMN input_refs_text TO input_refs`
    yield* sql`ALTER TABLE spans RENAME COLUMN output_refs_text TO output_refs`
  }

  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_spans_share() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      skel text;
      parts text[];
    BEGIN
      IF ${arrayRefs("input")} THEN NEW.input_refs := tapedeck_refs_text(NEW.input_refs::bigint[]); END IF;
      IF ${arrayRefs("output")} THEN NEW.output_refs := tapedeck_refs_text(NEW.output_refs::bigint[]); END IF;
${shareColumn("input")}${shareColumn("output")}
      RETURN NEW;
    END $$`)
  yield* sql`DROP TRIGGER IF EXISTS spans_share ON spans`
  yield* sql.unsafe(`
    CREATE TRIGGER spans_share BEFORE INSERT OR UPDATE ON spans
    FOR EACH ROW WHEN (${changes("input")} OR ${changes("output")})
    EXECUTE FUNCTION tapedeck_spans_share()`)

  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_spans_release_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('tapedeck.release_parts', true) = 'deferred' THEN
        INSERT INTO span_contents_released (account_id, part_id)
        SELECT DISTINCT g.account_id, r.id FROM gone g
        CROSS JOIN LATERAL ${refsOf("g")}
        WHERE ${hasRefs("g")};
        RETURN NULL;
      END IF;
      UPDATE span_contents SET orphaned_at = now()
      WHERE id IN (
        SELECT c.id FROM span_contents c
        WHERE c.orphaned_at IS NULL AND c.id IN (
          SELECT r.id FROM gone g CROSS JOIN LATERAL ${refsOf("g")} WHERE ${hasRefs("g")})
        ORDER BY c.id
        FOR UPDATE OF c);
      RETURN NULL;
    END $$`)
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_spans_release_rewritten() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE span_contents SET orphaned_at = now()
      WHERE id IN (
        SELECT c.id FROM span_contents c
        WHERE c.orphaned_at IS NULL AND c.id IN (
          SELECT r.id FROM gone g CROSS JOIN LATERAL ${refsOf("g")} WHERE ${hasRefs("g")}
          EXCEPT
          SELECT r.id FROM kept k CROSS JOIN LATERAL ${refsOf("k")} WHERE ${hasRefs("k")})
        ORDER BY c.id
        FOR UPDATE OF c);
      RETURN NULL;
    END $$`)
  yield* sql`DROP TRIGGER IF EXISTS spans_release_rewritten ON spans`
  yield* sql`
    CREATE TRIGGER spans_release_rewritten AFTER UPDATE ON spans REFERENCING OLD TABLE AS gone NEW TABLE AS kept
    FOR EACH STATEMENT EXECUTE FUNCTION tapedeck_spans_release_rewritten()`
})
