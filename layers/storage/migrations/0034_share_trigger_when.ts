import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The split trigger of 0030_shared_span_content (`spans_share`) called only for the rows it changes: a payload sent
 * split whose parts are still to resolve, or one written whole that is large or carries layout columns to clear. A
 * row written by the application (small payloads inline, large ones split with their references resolved first) no
 * longer calls the plpgsql function at all: the condition is evaluated in the executor, per row, without a function
 * call. The function is unchanged and the condition is exactly the one under which it changes the row. The condition
 * names the payload columns: a later change of their type drops the trigger first and creates it again after.
 */
const SHARE_BYTES = 1024

const changes = (c: "input" | "output") => `(NEW.${c} IS NULL AND NEW.${c}_parts IS NOT NULL)
  OR (NEW.${c} IS NOT NULL AND (NEW.${c}_skel IS NOT NULL OR NEW.${c}_refs IS NOT NULL OR NEW.${c}_parts IS NOT NULL
    OR NEW.${c}_hashes IS NOT NULL OR octet_length(NEW.${c}::text) >= ${SHARE_BYTES}))`

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP TRIGGER IF EXISTS spans_share ON spans`
  yield* sql.unsafe(`
    CREATE TRIGGER spans_share BEFORE INSERT OR UPDATE ON spans
    FOR EACH ROW WHEN (${changes("input")} OR ${changes("output")})
    EXECUTE FUNCTION tapedeck_spans_share()`)
})
