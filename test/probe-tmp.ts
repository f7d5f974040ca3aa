import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { SearchFilters } from "#src/domain/Search"
import { Embedder } from "#layers/search/Embedder"
import { SpanIndex } from "#layers/search/SpanIndex"
import { KINDS } from "./fixtures/search/relevance.ts"
import { openSearchRuntime } from "./support/SearchRuntime.ts"
const rt = await openSearchRuntime({ DATABASE_URL: process.env.PROBE_URL!, TAPEDECK_DATA_DIR: "/tmp/sr/probe-data" })
const run = <A>(e: Effect.Effect<A, unknown, any>) => rt.runPromise(e as Effect.Effect<A>)
const [acc] = await run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ a: string }>`SELECT account_id::text AS a FROM span_embeddings LIMIT 1`))
const queries = KINDS.flatMap((k) => [k.query, k.paraphrase])
const filterSets: Record<string, unknown> = {
  "no filter": undefined,
  span_type: { span_type: "tool_call" },
  "model + dates": { model: "claude-haiku", date_from: "2026-02-01T00:00:00Z", date_to: "2026-02-28T00:00:00Z" },
  "min_cost + status": { min_cost: 0.09, status: "failed" }
}
const legs = process.env.PROBE_LEGS ? process.env.PROBE_LEGS.split(",") : undefined
for (const round of [0, 1]) {
  const line: Array<string> = []
  for (const [label, filters] of Object.entries(filterSets)) {
    const t: Array<number> = []
    for (let i = 0; i < 30; i++) {
      const q = queries[i % queries.length]!
      const t0 = performance.now()
      await run(Effect.gen(function* () {
        const index = yield* SpanIndex
        const embedder = yield* Embedder
        const [vector] = yield* embedder.embed([q])
        return yield* index.search({ accountId: acc!.a as any, embedder: embedder.id, query: q, vector: vector!,
          filters: filters === undefined ? undefined : Schema.decodeUnknownSync(SearchFilters)(filters), limit: 20, offset: 0,
          ...(legs ? { legs: legs as any } : {}) })
      }))
      t.push(performance.now() - t0)
    }
    t.sort((a, b) => a - b)
    line.push(`${label} ${t[15]!.toFixed(1)}`)
  }
  if (round === 1) console.log(process.env.PROBE_LABEL ?? "", line.join(" | "))
}
await rt.dispose()
