import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * No GIN index on the spans' references to shared parts (0030_shared_span_content's spans_content_refs). Every span
 * written added an entry per part it references (a model call of the 30-step agent references its whole history):
 * about 530 bytes a span and a seventh of PostgreSQL's CPU on REST ingestion (docs/performance.md). Only the sweep
 * read it; the sweep now reads the references of the released parts' accounts in one pass per batch, outside the
 * locks it takes (layers/storage/SharedContent.ts).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX IF EXISTS spans_content_refs`
})
