import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// The full-text index's pending list at its smallest (64 kB instead of the server's 4 MB gin_pending_list_limit).
// New entries are appended to the list uncompressed, one per lexeme and span, and merged into the index when it is
// full; the pages it held stay in the index file afterwards. At the default that was about 4 MB per index whatever
// the number of spans (at 6,100 spans, 650 bytes a span: docs/performance.md, "Search"); a short list is merged more
// often, in smaller steps, and a search reads less of it (every lexical query scans the whole list).
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER INDEX span_embeddings_tsv SET (gin_pending_list_limit = 64)`
})
