import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Shared span content. A chat agent's model calls each carry the whole conversation so far, so most of a span's
 * input is a copy of the previous call's. Large parts of span payloads (array elements, object values and strings
 * of at least CUT_BYTES) are stored once per account in `span_contents`, keyed by the SHA-256 of their text; the
 * span keeps a skeleton (its payload's JSON text with each shared part replaced by a \x01 byte, which valid JSON
 * text never contains) and the ids of the parts in order. `tapedeck_payload` puts them back together.
 *
 * The split is a trigger, so every write path (REST, SDK, OTLP's upsert and its COPY) stores the same layout, and
 * payloads of under SHARE_BYTES are stored inline as before. The trigger runs in the writer's statement: a part
 * already stored is found by an index lookup and not written or locked (unless a sweep marked it, see below), a new
 * one is inserted (ON CONFLICT DO NOTHING, looked up again when a concurrent writer inserted it first: each statement
 * of a plpgsql function sees what committed before it started).
 *
 * Release is a sweep, not a reference count: a count would be one more row update (and row lock) per part per span
 * on the hottest rows (every run of an agent shares its system prompt), serializing concurrent ingestion.
 * Deleting or rewriting spans marks the parts they referenced (`orphaned_at`); a writer that finds a marked part
 * clears the mark; the sweep deletes parts still marked after a grace period that no span references (a GIN index
 * on the spans' references answers that). A writer that found a part unmarked before it was marked commits long
 * before the grace period ends, and its span is then seen by the sweep.
 */
const CUT_BYTES = 256
const SHARE_BYTES = 1024

/** The trigger's step for one payload column (`input` or `output`): its parts stored and referenced, or split. */
const shareColumn = (column: "input" | "output") => `
      IF NEW.${column} IS NULL AND NEW.${column}_parts IS NOT NULL THEN
        NEW.${column}_refs := tapedeck_share_parts(NEW.account_id, NEW.${column}_parts, NEW.${column}_hashes);
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
            NEW.${column}_refs := tapedeck_share_parts(NEW.account_id, parts);
          END IF;
        END IF;
      END IF;
`

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE span_contents (
      id bigserial PRIMARY KEY,
      account_id uuid NOT NULL,
      hash bytea NOT NULL,
      body text NOT NULL,
      orphaned_at timestamptz,
      UNIQUE (account_id, hash)
    )`
  // Most parts are under the ~2 kB from which PostgreSQL compresses a row by default: compress them too.
  yield* sql`ALTER TABLE span_contents SET (toast_tuple_target = 128)`
  yield* sql`CREATE INDEX span_contents_orphaned ON span_contents (orphaned_at) WHERE orphaned_at IS NOT NULL`
  yield* sql.unsafe(`DO $$ BEGIN
    EXECUTE 'ALTER TABLE span_contents ALTER COLUMN body SET COMPRESSION lz4';
  EXCEPTION WHEN feature_not_supported OR syntax_error THEN NULL;
  END $$`)
  // Where the background conversion of spans written before this migration stands (SharedContent.convertBatch):
  // the last (trace_id, id) converted, in key order; `done` once it reached the end.
  yield* sql`
    CREATE TABLE span_content_conversion (
      singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
      trace_id uuid,
      span_id uuid,
      converted bigint NOT NULL DEFAULT 0,
      done boolean NOT NULL DEFAULT false
    )`
  yield* sql`INSERT INTO span_content_conversion (done) SELECT NOT EXISTS (SELECT 1 FROM spans)`
  yield* sql`
    ALTER TABLE spans ADD COLUMN input_skel text, ADD COLUMN input_refs bigint[], ADD COLUMN input_parts text[],
      ADD COLUMN input_hashes text[], ADD COLUMN output_skel text, ADD COLUMN output_refs bigint[],
      ADD COLUMN output_parts text[], ADD COLUMN output_hashes text[]`
  yield* sql`
    CREATE INDEX spans_content_refs ON spans USING gin ((COALESCE(input_refs, '{}') || COALESCE(output_refs, '{}')))
    WHERE input_refs IS NOT NULL OR output_refs IS NOT NULL`

  // The ids of the account's parts with these texts, in order; those not stored yet are stored now. The hashes are
  // the writer's (the SHA-256 of each text, hex), computed here when it gave none. A writer leaves out (NULL) the
  // text of a part it knows is stored (layers/traces/KnownParts.ts), or stored by an earlier row of the same statement
  // (each statement of this function sees what the transaction wrote before it); such a part missing is an error
  // (TD001), never a dangling reference. One lookup for all the parts of a
  // payload; a part marked released is unmarked (and so kept by the sweep); a part inserted by a
  // concurrent writer, or deleted by the sweep meanwhile, is found or stored by the next round.
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_share_parts(p_account uuid, p_parts text[], p_hashes text[] DEFAULT NULL)
    RETURNS bigint[] LANGUAGE plpgsql AS $$
    DECLARE
      hashes bytea[] := CASE WHEN p_hashes IS NULL OR cardinality(p_hashes) <> cardinality(p_parts)
        THEN ARRAY(SELECT sha256(convert_to(t, 'UTF8')) FROM unnest(p_parts) AS t)
        ELSE ARRAY(SELECT decode(h, 'hex') FROM unnest(p_hashes) AS h) END;
      ids bigint[];
      missing boolean;
      lost boolean;
      marked boolean;
    BEGIN
      LOOP
        SELECT array_agg(c.id ORDER BY u.i), bool_or(c.id IS NULL), bool_or(c.orphaned_at IS NOT NULL)
        INTO ids, missing, marked
        FROM unnest(hashes) WITH ORDINALITY AS u(h, i)
        LEFT JOIN span_contents c ON c.account_id = p_account AND c.hash = u.h;
        IF NOT missing AND NOT marked THEN RETURN ids; END IF;
        IF missing THEN
          -- a part missing whose text was not sent (with this or another of its occurrences in the payload)
          SELECT EXISTS (
            SELECT 1 FROM unnest(hashes) AS u(h)
            WHERE NOT EXISTS (SELECT 1 FROM span_contents c WHERE c.account_id = p_account AND c.hash = u.h)
              AND NOT EXISTS (SELECT 1 FROM unnest(hashes, p_parts) AS v(h, t) WHERE v.h = u.h AND v.t IS NOT NULL)
          ) INTO lost;
          IF lost THEN
            RAISE EXCEPTION 'shared span content sent by hash only is not stored' USING ERRCODE = 'TD001';
          END IF;
        END IF;
        IF marked THEN
          UPDATE span_contents SET orphaned_at = NULL
          WHERE account_id = p_account AND hash = ANY(hashes) AND orphaned_at IS NOT NULL;
        END IF;
        IF missing THEN
          INSERT INTO span_contents (account_id, hash, body)
          SELECT DISTINCT ON (u.h) p_account, u.h, u.t FROM unnest(hashes, p_parts) AS u(h, t)
          WHERE u.t IS NOT NULL
          ORDER BY u.h
          ON CONFLICT (account_id, hash) DO NOTHING;
        END IF;
      END LOOP;
    END $$`)

  // Appends a value to the skeleton, and the parts cut out of it to `parts`: array elements and object values
  // when large; arrays and objects are recursed into (a conversation's messages are the elements of an array, at
  // the top or under a key).
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_cut(p_value json, p_depth int, INOUT skel text, INOUT parts text[])
    LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE
      kind text := json_typeof(p_value);
      item record;
      sep text := '';
      t text;
    BEGIN
      IF kind = 'array' AND p_depth < 8 THEN
        skel := skel || '[';
        FOR item IN SELECT value FROM json_array_elements(p_value) LOOP
          skel := skel || sep;
          sep := ',';
          t := item.value::text;
          IF octet_length(t) < ${CUT_BYTES} THEN
            skel := skel || t;
          ELSIF json_typeof(item.value) = 'array' THEN
            SELECT c.skel, c.parts INTO skel, parts FROM tapedeck_cut(item.value, p_depth + 1, skel, parts) c;
          ELSE
            skel := skel || chr(1);
            parts := parts || t;
          END IF;
        END LOOP;
        skel := skel || ']';
      ELSIF kind = 'object' AND p_depth < 8 THEN
        skel := skel || '{';
        FOR item IN SELECT key, value FROM json_each(p_value) LOOP
          skel := skel || sep || to_json(item.key)::text || ':';
          sep := ',';
          t := item.value::text;
          IF octet_length(t) < ${CUT_BYTES} THEN
            skel := skel || t;
          ELSIF json_typeof(item.value) IN ('array', 'object') THEN
            SELECT c.skel, c.parts INTO skel, parts FROM tapedeck_cut(item.value, p_depth + 1, skel, parts) c;
          ELSE
            skel := skel || chr(1);
            parts := parts || t;
          END IF;
        END LOOP;
        skel := skel || '}';
      ELSIF octet_length(p_value::text) >= ${CUT_BYTES} THEN
        skel := skel || chr(1);
        parts := parts || p_value::text;
      ELSE
        skel := skel || p_value::text;
      END IF;
    END $$`)

  // The payload's text from its layout: inline (json), or skeleton and parts.
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_assemble(p_skel text, p_refs bigint[]) RETURNS text LANGUAGE sql STABLE AS $$
      SELECT string_agg(p.piece || COALESCE(c.body, ''), '' ORDER BY p.i)
      FROM unnest(string_to_array(p_skel, chr(1))) WITH ORDINALITY AS p(piece, i)
      LEFT JOIN span_contents c ON c.id = p_refs[p.i]
    $$`)
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_payload_text(p_inline json, p_skel text, p_refs bigint[]) RETURNS text
    LANGUAGE sql STABLE AS $$
      SELECT CASE WHEN p_skel IS NULL THEN p_inline::text ELSE tapedeck_assemble(p_skel, p_refs) END
    $$`)
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_payload(p_inline json, p_skel text, p_refs bigint[]) RETURNS json
    LANGUAGE sql STABLE AS $$
      SELECT CASE WHEN p_skel IS NULL THEN p_inline ELSE tapedeck_assemble(p_skel, p_refs)::json END
    $$`)

  // A payload written whole (the column set) is split when large. One written split (skeleton, parts' text and their hashes, as
  // layers/traces/PayloadSplit.ts splits it on the way in) gets its parts stored and referenced; the parts and hashes
  // columns are never kept. One written as NULL keeps the layout given (an upsert copies the layout its own insert already
  // split: EXCLUDED's). Any update runs it (no column list, which would pin the payload columns' types): a span
  // still stored whole is split when it is next written.
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_spans_share() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      skel text;
      parts text[];
    BEGIN
${shareColumn("input")}${shareColumn("output")}
      RETURN NEW;
    END $$`)
  yield* sql`
    CREATE TRIGGER spans_share BEFORE INSERT OR UPDATE ON spans
    FOR EACH ROW EXECUTE FUNCTION tapedeck_spans_share()`

  // Parts that deleted or rewritten spans referenced become candidates for the sweep.
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_spans_release_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE span_contents SET orphaned_at = now()
      WHERE orphaned_at IS NULL AND id IN (
        SELECT unnest(COALESCE(input_refs, '{}') || COALESCE(output_refs, '{}')) FROM gone
        WHERE input_refs IS NOT NULL OR output_refs IS NOT NULL);
      RETURN NULL;
    END $$`)
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_spans_release_rewritten() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE span_contents SET orphaned_at = now()
      WHERE orphaned_at IS NULL AND id IN (
        SELECT unnest(COALESCE(input_refs, '{}') || COALESCE(output_refs, '{}')) FROM gone
        WHERE input_refs IS NOT NULL OR output_refs IS NOT NULL
        EXCEPT
        SELECT unnest(COALESCE(input_refs, '{}') || COALESCE(output_refs, '{}')) FROM kept
        WHERE input_refs IS NOT NULL OR output_refs IS NOT NULL);
      RETURN NULL;
    END $$`)
  yield* sql`
    CREATE TRIGGER spans_release_deleted AFTER DELETE ON spans REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION tapedeck_spans_release_deleted()`
  yield* sql`
    CREATE TRIGGER spans_release_rewritten AFTER UPDATE ON spans REFERENCING OLD TABLE AS gone NEW TABLE AS kept
    FOR EACH STATEMENT EXECUTE FUNCTION tapedeck_spans_release_rewritten()`
})
