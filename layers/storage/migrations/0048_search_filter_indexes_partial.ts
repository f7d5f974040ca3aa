import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The search filters' indexes on `cost` and `model` hold only the rows that have one. A filter on either
 * (`e.cost >= …`, `e.model = …`) never matches a row without it, so the planner uses the partial index for both; the
 * rows left out are the spans that are not model calls (tools, actions, agents), about half of an agent's spans, which
 * the full indexes kept as NULL entries (docs/search.md, "Index").
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX IF EXISTS span_embeddings_cost`
  yield* sql`CREATE INDEX span_embeddings_cost ON span_embeddings (account_id, cost) WHERE cost IS NOT NULL`
  yield* sql`DROP INDEX IF EXISTS span_embeddings_model`
  yield* sql`CREATE INDEX span_embeddings_model ON span_embeddings (account_id, model) WHERE model IS NOT NULL`
})
