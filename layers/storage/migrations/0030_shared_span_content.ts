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

export default Effect.gen(function*() {
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
  yield* sql`CREATE INDEX span_contents_orphaned ON span_contents (orphaned_at) WHERE orphaned_at IS NOT NULL`
  yield* sql.unsafe(`DO $$ BEGIN
    EXECUTE 'ALTER TABLE span_contents ALTER COLUMN body SET COMPRESSION lz4';
  EXCEPTION WHEN feature_not_supported OR syntax_error THEN NULL;
  END $$`)
  yield* sql`
    ALTER TABLE spans ADD COLUMN input_skel text, ADD COLUMN input_refs bigint[],
      ADD COLUMN output_skel text, ADD COLUMN output_refs bigint[]`
  yield* sql`
    CREATE INDEX spans_content_refs ON spans USING gin ((COALESCE(input_refs, '{}') || COALESCE(output_refs, '{}')))
    WHERE input_refs IS NOT NULL OR output_refs IS NOT NULL`

  // The id of the account's part with this text, stored now if it was not.
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_share_part(p_account uuid, p_body text) RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE
      h bytea := sha256(convert_to(p_body, 'UTF8'));
      found_id bigint;
      marked boolean;
    BEGIN
      LOOP
        SELECT id, orphaned_at IS NOT NULL INTO found_id, marked FROM span_contents
        WHERE account_id = p_account AND hash = h;
        IF found_id IS NULL THEN
          INSERT INTO span_contents (account_id, hash, body) VALUES (p_account, h, p_body)
          ON CONFLICT (account_id, hash) DO NOTHING RETURNING id INTO found_id;
        ELSIF marked THEN
          UPDATE span_contents SET orphaned_at = NULL WHERE id = found_id RETURNING id INTO found_id;
        END IF;
        IF found_id IS NOT NULL THEN RETURN found_id; END IF;
      END LOOP;
    END $$`)

  // Appends a value to the skeleton: array elements and object values are cut out when large, arrays and objects
  // recursed into (a conversation's messages are the elements of an array, at the top or under a key).
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_cut(p_account uuid, p_value json, p_depth int, INOUT skel text, INOUT refs bigint[])
    LANGUAGE plpgsql AS $$
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
          IF json_typeof(item.value) = 'array' AND octet_length(t) >= ${CUT_BYTES} THEN
            SELECT c.skel, c.refs INTO skel, refs FROM tapedeck_cut(p_account, item.value, p_depth + 1, skel, refs) c;
          ELSIF octet_length(t) >= ${CUT_BYTES} THEN
            skel := skel || chr(1);
            refs := refs || tapedeck_share_part(p_account, t);
          ELSE
            skel := skel || t;
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
            SELECT c.skel, c.refs INTO skel, refs FROM tapedeck_cut(p_account, item.value, p_depth + 1, skel, refs) c;
          ELSE
            skel := skel || chr(1);
            refs := refs || tapedeck_share_part(p_account, t);
          END IF;
        END LOOP;
        skel := skel || '}';
      ELSIF octet_length(p_value::text) >= ${CUT_BYTES} THEN
        skel := skel || chr(1);
        refs := refs || tapedeck_share_part(p_account, p_value::text);
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

  // A payload written inline (the column set) is split when large; one written as NULL keeps the layout given
  // (an upsert copies the layout its own insert already split: EXCLUDED's).
  yield* sql.unsafe(`
    CREATE FUNCTION tapedeck_spans_share() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      skel text;
      refs bigint[];
    BEGIN
      IF NEW.input IS NOT NULL THEN
        NEW.input_skel := NULL;
        NEW.input_refs := NULL;
        IF octet_length(NEW.input::text) >= ${SHARE_BYTES} THEN
          SELECT c.skel, c.refs INTO skel, refs FROM tapedeck_cut(NEW.account_id, NEW.input, 0, '', '{}') c;
          IF cardinality(refs) > 0 THEN
            NEW.input := NULL;
            NEW.input_skel := skel;
            NEW.input_refs := refs;
          END IF;
        END IF;
      END IF;
      IF NEW.output IS NOT NULL THEN
        NEW.output_skel := NULL;
        NEW.output_refs := NULL;
        IF octet_length(NEW.output::text) >= ${SHARE_BYTES} THEN
          SELECT c.skel, c.refs INTO skel, refs FROM tapedeck_cut(NEW.account_id, NEW.output, 0, '', '{}') c;
          IF cardinality(refs) > 0 THEN
            NEW.output := NULL;
            NEW.output_skel := skel;
            NEW.output_refs := refs;
          END IF;
        END IF;
      END IF;
      RETURN NEW;
    END $$`)
  yield* sql`
    CREATE TRIGGER spans_share BEFORE INSERT OR UPDATE OF input, output ON spans
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
