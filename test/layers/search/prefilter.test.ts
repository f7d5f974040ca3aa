import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { Embedder } from "#layers/search/Embedder"
import { type PendingSpan, SpanIndex } from "#layers/search/SpanIndex"
import { int8SignBits, signBits } from "#layers/search/VectorText"
import backfillSignBits from "#layers/storage/migrations/0026_search_sign_bits"
import { RUN_QUERIES, runSpans } from "../../fixtures/search/agentRuns.ts"
import { createTestDatabase, type TestDatabase } from "../../support/Database.ts"
import { uuid } from "../../support/Fixtures.ts"
import { openSearchRuntime, type SearchRuntime } from "../../support/SearchRuntime.ts"

// The sign-bit prefilter (migration 0026) against the exact scan: recall@10 of the prefilter and re-rank, the
// exact vector leg's top 10 as truth. Ties count as found (near-twin spans share a similarity): a prefilter hit
// is right when its similarity reaches the exact 10th's. The cut is shrunk to the sets' size (a fifth to a quarter
// of the rows; the service re-ranks PREFILTER_CANDIDATES, a far smaller share of a large account: test/bench/search.ts
// measures the agreement there).
const RECALL_FLOOR = 0.95

const open = openSearchRuntime
type Runtime = SearchRuntime

const RELEVANCE = uuid() as AccountId
const RANDOM = uuid() as AccountId
const RANDOM_SPANS = 2000
const DIMS = 256

let seed = 7
const uniform = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32
/** A standard normal draw (Box-Muller): Gaussian vectors point every way alike, the hardest case for the bits. */
const gaussian = () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform())
const randomVector = () => {
  const v = Float32Array.from({ length: DIMS }, gaussian)
  const norm = Math.hypot(...v)
  return v.map((x) => x / norm)
}

/** Spans with texts (their own vectors from the embedder) or, for the random set, given vectors. */
const load = (runtime: Runtime) =>
  runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const index = yield* SpanIndex
      const embedder = yield* Embedder
      for (const account of [RELEVANCE, RANDOM]) {
        yield* sql`INSERT INTO accounts (id, name) VALUES (${account}, ${`prefilter-${account}`})`
      }
      const relevanceTrace = uuid()
      yield* sql`INSERT INTO traces (id, account_id, status, started_at) VALUES (${relevanceTrace}, ${RELEVANCE}, 'completed', now())`
      for (const { span } of runSpans()) {
        yield* sql`
        INSERT INTO spans (trace_id, id, account_id, span_type, name, model, input, output, error, started_at, cost, duration_ms)
        VALUES (${relevanceTrace}, ${span.id as string}, ${RELEVANCE}, ${span.span_type as string}, ${span.name as string},
                ${(span.model as string) ?? null}, ${span.input === undefined ? null : JSON.stringify(span.input)}::jsonb,
                ${span.output === undefined ? null : JSON.stringify(span.output)}::jsonb, ${(span.error as string) ?? null},
                ${span.started_at as string}, ${span.cost as number}, ${span.duration_ms as number})`
      }
      const { pending } = yield* index.pendingOfTraces(RELEVANCE, [relevanceTrace], embedder.id)
      yield* index.store(embedder.id, pending, yield* embedder.embed(pending.map((p) => p.text)))

      const randomTrace = uuid()
      yield* sql`INSERT INTO traces (id, account_id, status, started_at) VALUES (${randomTrace}, ${RANDOM}, 'completed', now())`
      const ids = yield* sql<{ id: string }>`
      INSERT INTO spans (trace_id, id, account_id, span_type, name, started_at)
      SELECT ${randomTrace}::uuid, gen_random_uuid(), ${RANDOM}::uuid, 'llm_call', 'random ' || n, now()
      FROM generate_series(1, ${RANDOM_SPANS}) AS n
      RETURNING id`
      const spans: Array<PendingSpan> = ids.map((r) => ({
        traceId: randomTrace,
        spanId: r.id,
        accountId: RANDOM,
        text: "random",
        hash: "random"
      }))
      yield* index.store("random", spans, spans.map(randomVector))
    }).pipe(Effect.orDie)
  )

const vectorTop = (
  runtime: Runtime,
  input: { account: AccountId; embedder: string; query: string; vector: Float32Array },
  path: "exact" | "prefilter",
  prefilterCut: number
) =>
  runtime.runPromise(
    Effect.gen(function* () {
      const index = yield* SpanIndex
      const hits = yield* index.search({
        accountId: input.account,
        embedder: input.embedder,
        query: input.query,
        vector: input.vector,
        filters: undefined,
        limit: 10,
        offset: 0,
        legs: ["vector"],
        path,
        prefilterCut
      })
      return hits.map((h) => h.span.similarity)
    }).pipe(Effect.orDie)
  )

/** The mean share of the exact top 10 the prefilter found (a hit at least as similar as the exact 10th counts). */
const recallAt10 = async (
  runtime: Runtime,
  queries: ReadonlyArray<{ account: AccountId; embedder: string; query: string; vector: Float32Array }>,
  cut: number
) => {
  let sum = 0
  for (const q of queries) {
    const exact = await vectorTop(runtime, q, "exact", cut)
    const approx = await vectorTop(runtime, q, "prefilter", cut)
    const tenth = exact[exact.length - 1]!
    sum += approx.filter((s) => s >= tenth - 1e-6).length / exact.length
  }
  return sum / queries.length
}

let runtime: Runtime
let database: TestDatabase
beforeAll(async () => {
  database = await createTestDatabase()
  runtime = await open(database.env)
  await load(runtime)
}, 120_000)
afterAll(async () => {
  await runtime.dispose()
  await database.drop()
})

describe("sign-bit prefilter and exact re-rank", () => {
  test(`recall@10 against the exact scan ≥ ${RECALL_FLOOR} on the relevance set (cut 80 of 320 spans)`, async () => {
    const embedder = await runtime.runPromise(Embedder)
    const vectors = await runtime.runPromise(embedder.embed(RUN_QUERIES.map((q) => q.text)).pipe(Effect.orDie))
    const queries = RUN_QUERIES.map((q, i) => ({
      account: RELEVANCE,
      embedder: embedder.id,
      query: q.text,
      vector: vectors[i]!
    }))
    const recall = await recallAt10(runtime, queries, 80)
    console.log(`prefilter recall@10, relevance set (${database.backend}): ${recall.toFixed(3)}`)
    expect(recall).toBeGreaterThanOrEqual(RECALL_FLOOR)
  }, 60_000)

  test(`recall@10 against the exact scan ≥ ${RECALL_FLOOR} on random Gaussian vectors (cut 400 of ${RANDOM_SPANS})`, async () => {
    const queries = Array.from({ length: 40 }, () => ({
      account: RANDOM,
      embedder: "random",
      query: "",
      vector: randomVector()
    }))
    const recall = await recallAt10(runtime, queries, 400)
    console.log(`prefilter recall@10, random vectors (${database.backend}): ${recall.toFixed(3)}`)
    expect(recall).toBeGreaterThanOrEqual(RECALL_FLOOR)
  }, 60_000)

  test("every stored vector has its sign bits, one per dimension", async () => {
    const missing = await runtime.runPromise(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) =>
          sql<{
            n: number
          }>`SELECT count(*)::int AS n FROM span_embeddings e LEFT JOIN search_embedders m ON m.id = e.embedder_id
              WHERE e.sign_bits IS NULL OR length(e.sign_bits) IS DISTINCT FROM m.dims`
      ).pipe(Effect.orDie)
    )
    expect(missing[0]!.n).toBe(0)
  })

  test("without pgvector, the sign bits are those of the stored one-byte components", async () => {
    const rows = await runtime.runPromise(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) =>
          sql<{ type: string; bits: string; hex: string | null }>`
        SELECT pg_typeof(embedding)::text AS type, sign_bits::text AS bits,
               CASE WHEN pg_typeof(embedding)::text = 'bytea' THEN encode(embedding::text::bytea, 'hex') END AS hex
        FROM span_embeddings ORDER BY span_id LIMIT 200`
      ).pipe(Effect.orDie)
    )
    expect(rows.length).toBeGreaterThan(0)
    if (rows[0]!.type !== "bytea") return
    for (const row of rows) expect(row.bits).toBe(int8SignBits(Buffer.from(row.hex!, "hex")))
  })

  test("migration 0026 backfills rows stored without sign bits with the bits the store writes", async () => {
    const [column] = await runtime.runPromise(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ type: string }>`SELECT pg_typeof(embedding)::text AS type FROM span_embeddings LIMIT 1`
      ).pipe(Effect.orDie)
    )
    // Without pgvector the stored vector is a bytea since migration 0044, which 0026 (written for real[]) cannot
    // read: the test above checks the bits there.
    if (column!.type === "bytea") return
    const before = await runtime.runPromise(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) =>
          sql<{ span_id: string; bits: string }>`
        SELECT span_id, sign_bits::text AS bits FROM span_embeddings WHERE account_id = ${RANDOM} ORDER BY span_id LIMIT 50`
      ).pipe(Effect.orDie)
    )
    await runtime.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE span_embeddings SET sign_bits = NULL`
        yield* backfillSignBits
      }).pipe(Effect.orDie)
    )
    const after = await runtime.runPromise(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) =>
          sql<{ span_id: string; bits: string; nulls: number }>`
        SELECT span_id, sign_bits::text AS bits,
               (SELECT count(*)::int FROM span_embeddings WHERE sign_bits IS NULL) AS nulls
        FROM span_embeddings WHERE account_id = ${RANDOM} ORDER BY span_id LIMIT 50`
      ).pipe(Effect.orDie)
    )
    expect(after.map((r) => r.bits)).toEqual(before.map((r) => r.bits))
    expect(after[0]!.nulls).toBe(0)
    expect(signBits([0.5, -0.25, 0, 0.00000004, 1e-6])).toBe("10001")
  })
})
