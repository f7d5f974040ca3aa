import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * `tapedeck_cut` (0030_shared_span_content) cuts an object element of an array (a chat message) into its small
 * remainder and its large values, as layers/traces/PayloadSplit.ts does, instead of cutting it whole: a tool result
 * inside a later model call's history (`{"role":"tool",...,"content":S}`) is then the same part as the tool span's
 * output (S), stored once. The element's skeleton (its text with its large values as \x01) is kept in the span's
 * skeleton when under CUT_BYTES; otherwise the element is cut whole, as before (a tool schema of many small values
 * stays one part). Arrays and object values are recursed into as before.
 *
 * The skeleton's format is unchanged: a skeleton is still JSON text with \x01 where each part goes, so reads need no
 * change, and spans stored before keep their layout (their messages whole) and stay readable as they are.
 */
const CUT_BYTES = 256

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`
    CREATE OR REPLACE FUNCTION tapedeck_cut(p_value json, p_depth int, INOUT skel text, INOUT parts text[])
    LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE
      kind text := json_typeof(p_value);
      item record;
      sep text := '';
      t text;
      sub_skel text;
      sub_parts text[];
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
          ELSIF json_typeof(item.value) = 'object' THEN
            SELECT c.skel, c.parts INTO sub_skel, sub_parts FROM tapedeck_cut(item.value, p_depth + 1, '', '{}') c;
            IF octet_length(sub_skel) < ${CUT_BYTES} THEN
              skel := skel || sub_skel;
              parts := parts || sub_parts;
            ELSE
              skel := skel || chr(1);
              parts := parts || t;
            END IF;
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
})
