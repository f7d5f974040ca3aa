import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { type TraceSpanTextSource, traceSpanTexts } from "#src/domain/search/SpanText"
import { Embedder } from "#layers/search/Embedder"
import { ftsText, SpanIndex } from "#layers/search/SpanIndex"
import { int8Direction } from "../../support/Int8Vectors.ts"
import halfVectors from "#layers/storage/migrations/0036_search_half_vectors"
import compactFulltext from "#layers/storage/migrations/0037_search_fulltext_compact"
import compactRow from "#layers/storage/migrations/0044_search_row_compact"
import lexemeHashes from "#layers/storage/migrations/0046_search_lexeme_hashes"
import { createTestDatabase, type TestDatabase } from "../../support/Database.ts"
import { uuid } from "../../support/Fixtures.ts"
import { INT8_COSINE_TOLERANCE } from "../../support/SearchTolerance.ts"
import { embeddedSearch, openSearchRuntime, type SearchRuntime } from "../../support/SearchRuntime.ts"

// What the search index stores of an agent trace, and how small: a model call indexed for what is new in it
// (docs/search.md, "What is embedded"), vectors at 2 bytes a component with pgvector and 1 without, full-text
// lexemes as 4-byte hashes, the embedder as a small id.

const pad = (s: string) => `${s} ${"and then some more ordinary words to make it long enough ".repeat(2)}`
const SYSTEM = pad("You follow the zanzibar lighthouse protocol for every booking.")
const USER = pad("Please book a ferry from Dar es Salaam for two adults next Tuesday.")
const RESULT = pad("quokka ferries: departures 08:15 and 13:40, fare 35 USD per adult, seats available.")
const FOLLOW_UP = pad("Actually make it the afternoon crossing and add a bicycle.")

/** A three-call agent trace: call 1 → tool → call 2 → (user follow-up) call 3, each call carrying the history. */
const agentTrace = (traceId: string): Array<TraceSpanTextSource> => {
  const a1 = {
    role: "assistant",
    content: "Checking the ferry timetable.",
    tool_calls: [{ id: "c1", type: "function", function: { name: "ferry_search", arguments: '{"from":"DAR"}' } }]
  }
  const a2 = { role: "assistant", content: "There are two departures, at 08:15 and 13:40." }
  const history1 = [
    { role: "system", content: SYSTEM },
    { role: "user", content: USER }
  ]
  const history2 = [...history1, a1, { role: "tool", tool_call_id: "c1", content: RESULT }]
  const history3 = [...history2, a2, { role: "user", content: FOLLOW_UP }]
  const span = (id: number, span_type: string, name: string, input: unknown, output: unknown) => ({
    trace_id: traceId,
    id: `00000000-0000-4000-8000-00000000000${id}`,
    started_at: 1_700_000_000_000 + id * 1000,
    name,
    span_type,
    model: span_type === "llm_call" ? "gpt-4o" : null,
    input,
    output,
    error: null
  })
  return [
    span(1, "llm_call", "chat gpt-4o", { model: "gpt-4o", messages: history1, tools: [{ name: "ferry_search" }] }, a1),
    span(2, "tool_call", "ferry_search", { from: "DAR" }, RESULT),
    span(3, "llm_call", "chat gpt-4o", { model: "gpt-4o", messages: history2, tools: [{ name: "ferry_search" }] }, a2),
    span(
      4,
      "llm_call",
      "chat gpt-4o",
      { model: "gpt-4o", messages: history3 },
      {
        role: "assistant",
        content: "Booked the 13:40 crossing with a bicycle."
      }
    )
  ]
}

describe("the text of a trace's spans", () => {
  const spans = agentTrace("t1")
  const [call1, tool, call2, call3] = traceSpanTexts(spans)

  test("the first model call holds the system prompt and the task; later calls do not repeat them", () => {
    expect(call1).toContain("zanzibar lighthouse")
    expect(call1).toContain("Dar es Salaam")
    for (const text of [call2!, call3!]) {
      expect(text).not.toContain("zanzibar")
      expect(text).not.toContain("Dar es Salaam")
    }
  })

  test("a tool result is indexed on its tool span, not again in the model call that reads it", () => {
    expect(tool).toContain("quokka ferries")
    expect(call2).not.toContain("quokka")
    // What the call said is its own.
    expect(call2).toContain("two departures")
  })

  test("a later call holds the turns after the model's last one, not the earlier turns", () => {
    expect(call3).toContain("afternoon crossing")
    expect(call3).toContain("Booked the 13:40 crossing")
    expect(call3).not.toContain("two departures")
    expect(call3).not.toContain("Checking the ferry timetable")
  })

  test("the texts do not depend on the order the spans are read in", () => {
    const reversed = traceSpanTexts([...spans].reverse()).reverse()
    expect(reversed).toEqual([call1!, tool!, call2!, call3!])
  })

  test("a model call alone in its trace keeps its system prompt, and a tool result no span recorded", () => {
    const [alone] = traceSpanTexts([spans[2]!])
    expect(alone).toContain("zanzibar lighthouse")
    expect(alone).toContain("quokka ferries")
    expect(alone).not.toContain("Dar es Salaam")
  })

  test("a history given as a bare list of messages (as OTLP GenAI input is stored) is read the same way", () => {
    const bare = spans.map((s) =>
      s.span_type === "llm_call" ? { ...s, input: (s.input as { messages: unknown }).messages } : s
    )
    const texts = traceSpanTexts(bare)
    expect(texts[0]).toContain("zanzibar lighthouse")
    expect(texts[2]).not.toContain("zanzibar")
    expect(texts[2]).not.toContain("quokka")
    expect(texts[3]).toContain("afternoon crossing")
    expect(texts[3]).not.toContain("two departures")
  })

  test("spans of different traces do not share what they hold", () => {
    const other = agentTrace("t2")
    const texts = traceSpanTexts([...spans, ...other])
    expect(texts[4]).toContain("zanzibar lighthouse")
    expect(texts[5]).toContain("quokka ferries")
  })
})

const open = openSearchRuntime
const ACCOUNT = uuid() as AccountId
const TRACE = uuid()

let runtime: SearchRuntime
let database: TestDatabase

/** Inserts the agent trace's spans and indexes them as the index job does. */
const load = () =>
  runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const index = yield* SpanIndex
      const embedder = yield* Embedder
      yield* sql`INSERT INTO accounts (id, name) VALUES (${ACCOUNT}, ${`footprint-${ACCOUNT}`})`
      yield* sql`INSERT INTO traces (id, account_id, status, started_at) VALUES (${TRACE}, ${ACCOUNT}, 'completed', now())`
      for (const span of agentTrace(TRACE)) {
        yield* sql`
          INSERT INTO spans (trace_id, id, account_id, span_type, name, model, input, output, started_at)
          VALUES (${TRACE}, ${span.id}, ${ACCOUNT}, ${span.span_type}, ${span.name}, ${span.model},
                  ${JSON.stringify(span.input)}::jsonb, ${JSON.stringify(span.output)}::jsonb,
                  ${new Date(span.started_at).toISOString()})`
      }
      const { pending } = yield* index.pendingOfTraces(ACCOUNT, [TRACE], embedder.id)
      expect(pending.length).toBe(4)
      yield* index.store(embedder.id, pending, yield* embedder.embed(pending.map((p) => p.text)))
      expect((yield* index.pendingOfTraces(ACCOUNT, [TRACE], embedder.id)).pending).toEqual([])
    }).pipe(Effect.orDie)
  )

const search = (query: string) =>
  runtime.runPromise(
    embeddedSearch({ accountId: ACCOUNT, query, limit: 10 }).pipe(
      Effect.map(({ hits, vector }) => ({ hits: hits.map((h) => h.span), vector }))
    )
  )

const query = <A extends object>(text: string) =>
  runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<A>(text)).pipe(Effect.orDie))

/** The stored vectors as numbers, by span id. */
const storedVectors = async () => {
  const [column] = await query<{ type: string }>(
    `SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute
     WHERE attrelid = 'span_embeddings'::regclass AND attname = 'embedding'`
  )
  const type = column!.type
  if (type === "bytea") {
    const rows = await query<{ span_id: string; hex: string }>(
      "SELECT span_id::text, encode(embedding, 'hex') AS hex FROM span_embeddings ORDER BY span_id"
    )
    return { type, vectors: new Map(rows.map((r) => [r.span_id, int8Direction(Buffer.from(r.hex, "hex"))])) }
  }
  const rows = await query<{ span_id: string; v: Array<number> }>(
    "SELECT span_id::text, embedding::vector::real[] AS v FROM span_embeddings ORDER BY span_id"
  )
  return { type, vectors: new Map(rows.map((r) => [r.span_id, r.v.map(Number)])) }
}

beforeAll(async () => {
  database = await createTestDatabase()
  runtime = await open(database.env)
  await load()
}, 120_000)
afterAll(async () => {
  await runtime.dispose()
  await database.drop()
})

describe("the stored index", () => {
  test("a phrase of the system prompt finds the trace's first model call; a tool result's finds its tool span", async () => {
    const prompt = await search("zanzibar lighthouse protocol")
    expect(prompt.hits[0]!.id).toBe(agentTrace(TRACE)[0]!.id)
    expect(prompt.hits[0]!.match).toContain("lexical")
    const result = await search("quokka ferries")
    expect(result.hits[0]!.id).toBe(agentTrace(TRACE)[1]!.id)
    expect(result.hits[0]!.match).toContain("lexical")
  })

  test("vectors are stored at 2 bytes a component (pgvector) or 1 (without), and the cosine search reports stays close to the embedder's", async () => {
    const { type, vectors } = await storedVectors()
    expect(["halfvec", "bytea"]).toContain(type)
    const [size] = await query<{ bytes: number }>(
      "SELECT max(pg_column_size(embedding))::int AS bytes FROM span_embeddings"
    )
    expect(size!.bytes).toBeLessThan(type === "bytea" ? 256 + 8 : 256 * 2 + 32)
    const { hits, vector } = await search("ferry departures fare per adult")
    expect(hits.length).toBe(4)
    for (const hit of hits) {
      const stored = vectors.get(hit.id)!
      const [full] = await runtime.runPromise(
        Effect.flatMap(Embedder, (e) => e.embed([traceSpanTexts(agentTrace(TRACE))[Number(hit.id.slice(-1)) - 1]!]))
      )
      let exact = 0
      let quantised = 0
      for (let i = 0; i < vector.length; i++) {
        exact += vector[i]! * full![i]!
        quantised += vector[i]! * stored[i]!
      }
      expect(Math.abs(quantised - exact)).toBeLessThan(type === "bytea" ? INT8_COSINE_TOLERANCE : 2e-3)
      expect(Math.abs(hit.similarity - quantised)).toBeLessThan(1e-4)
    }
  })

  test("full-text lexemes are stored as one 4-byte hash each, under a GIN index with the smallest pending list", async () => {
    const [row] = await query<{ type: string; n: number; packed: boolean; lexemes: number }>(
      `SELECT (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
               WHERE attrelid = 'span_embeddings'::regclass AND attname = 'lexemes') AS type,
              count(*)::int AS n, bool_and(pg_column_size(lexemes) <= 24 + 4 * cardinality(lexemes)) AS packed,
              min(cardinality(lexemes))::int AS lexemes
       FROM span_embeddings`
    )
    expect(row).toEqual({ type: "integer[]", n: 4, packed: true, lexemes: expect.any(Number) })
    expect(row!.lexemes).toBeGreaterThan(10)
    const [index] = await query<{ options: Array<string> | null }>(
      "SELECT reloptions AS options FROM pg_class WHERE relname = 'span_embeddings_lexemes'"
    )
    expect(index!.options).toContain("gin_pending_list_limit=64")
  })

  test("migrations 0036, 0037, 0044 and 0046 convert rows written in the previous layouts, and search finds the same", async () => {
    const before = await search("quokka ferries departures")
    const { type, vectors } = await storedVectors()
    const stored = await query<{ span_id: string; lexemes: Array<number> }>(
      "SELECT span_id::text, lexemes FROM span_embeddings ORDER BY span_id"
    )
    // Back to the first layout: 4-byte components, the embedder's name and dimension on each row, an update time,
    // full-text vectors (of the texts the spans were stored with) with positions.
    await runtime.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`
          ALTER TABLE span_embeddings ADD COLUMN embedder text, ADD COLUMN dims integer,
            ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now()`
        yield* sql`
          UPDATE span_embeddings e SET embedder = m.name, dims = m.dims FROM search_embedders m WHERE m.id = e.embedder_id`
        if (type === "bytea") {
          yield* sql.unsafe(`
            CREATE FUNCTION test_float(v bytea) RETURNS real[] LANGUAGE sql IMMUTABLE AS $$
              SELECT array_agg(((get_byte(v, i) - 128) / n.norm)::real ORDER BY i)
              FROM generate_series(0, length(v) - 1) AS i,
                   (SELECT sqrt(sum((get_byte(v, j) - 128)^2)) AS norm FROM generate_series(0, length(v) - 1) AS j) n $$`)
          yield* sql`ALTER TABLE span_embeddings ADD COLUMN embedding_old real[]`
          yield* sql`UPDATE span_embeddings SET embedding_old = test_float(embedding)`
          yield* sql`DROP FUNCTION test_float(bytea)`
          yield* sql`ALTER TABLE span_embeddings DROP COLUMN embedding`
          yield* sql`ALTER TABLE span_embeddings RENAME COLUMN embedding_old TO embedding`
        } else {
          yield* sql`ALTER TABLE span_embeddings ALTER COLUMN embedding TYPE vector USING embedding::vector`
        }
        // The id's indexes (and pgvector's partial HNSW index) go with the column.
        yield* sql`ALTER TABLE span_embeddings DROP COLUMN embedder_id`
        yield* sql`DROP TABLE search_embedders`
        yield* sql`
          ALTER TABLE span_embeddings ALTER COLUMN embedder SET NOT NULL, ALTER COLUMN dims SET NOT NULL,
            ALTER COLUMN embedding SET NOT NULL`
        yield* sql`CREATE INDEX span_embeddings_account ON span_embeddings (account_id, embedder)`
        yield* sql`CREATE INDEX IF NOT EXISTS span_embeddings_started ON span_embeddings (account_id, started_at)`
        if (type === "bytea") {
          yield* sql`
            CREATE INDEX span_embeddings_sign_bits
            ON span_embeddings (account_id, embedder, dims) INCLUDE (trace_id, span_id, sign_bits)`
        }
        yield* sql`ALTER TABLE span_embeddings DROP COLUMN lexemes, ADD COLUMN tsv tsvector`
        for (const [i, span] of agentTrace(TRACE).entries()) {
          const text = ftsText(traceSpanTexts(agentTrace(TRACE))[i]!)
          yield* sql`UPDATE span_embeddings SET tsv = to_tsvector('english', ${text}) WHERE span_id = ${span.id}`
        }
        yield* sql`ALTER TABLE span_embeddings ALTER COLUMN tsv SET NOT NULL`
        yield* sql`CREATE INDEX span_embeddings_tsv ON span_embeddings USING gin (tsv)`
        yield* halfVectors
        yield* compactFulltext
        yield* compactRow
        yield* lexemeHashes
      }).pipe(Effect.orDie)
    )
    const after = await storedVectors()
    expect(after.type).toBe(type)
    for (const [id, v] of vectors) {
      const w = after.vectors.get(id)!
      expect(w.length).toBe(v.length)
      // One byte a component: converted twice (to 2 bytes by 0036, to 1 by 0044), within a step of the largest.
      expect(Math.max(...v.map((x, i) => Math.abs(x - w[i]!)))).toBeLessThan(type === "bytea" ? 1e-2 : 1e-3)
    }
    const columns = await query<{ name: string }>(
      "SELECT attname AS name FROM pg_attribute WHERE attrelid = 'span_embeddings'::regclass AND attnum > 0 AND NOT attisdropped"
    )
    const names = columns.map((c) => c.name)
    expect(names).toContain("embedder_id")
    for (const gone of ["embedder", "dims", "updated_at", "embedding_int8", "tsv"]) expect(names).not.toContain(gone)
    // 0046 hashes the lexemes as the store does.
    expect(
      await query<{ span_id: string; lexemes: Array<number> }>(
        "SELECT span_id::text, lexemes FROM span_embeddings ORDER BY span_id"
      )
    ).toEqual(stored)
    const [ids] = await query<{ n: number; missing: number }>(
      `SELECT (SELECT count(*)::int FROM search_embedders) AS n,
              (SELECT count(*)::int FROM span_embeddings WHERE embedder_id IS NULL) AS missing`
    )
    expect(ids).toEqual({ n: 1, missing: 0 })
    const indexes = (
      await query<{ name: string; def: string }>(
        "SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename = 'span_embeddings'"
      )
    ).map((i) => i.name)
    expect(indexes).not.toContain("span_embeddings_sign_bits")
    expect(indexes).not.toContain("span_embeddings_tsv")
    expect(indexes).toContain("span_embeddings_account")
    // Without pgvector the date filter's index is the covering prefilter index.
    expect(indexes).toContain(type === "bytea" ? "span_embeddings_prefilter" : "span_embeddings_started")
    if (type === "bytea") expect(indexes).not.toContain("span_embeddings_started")
    const [row] = await query<{ options: Array<string> | null }>(
      "SELECT reloptions AS options FROM pg_class WHERE relname = 'span_embeddings_lexemes'"
    )
    expect(row!.options).toContain("gin_pending_list_limit=64")
    // The HNSW index (pgvector) is created again on the next store; the exact path answers meanwhile.
    const again = await search("quokka ferries departures")
    expect(again.hits.map((h) => h.id).sort()).toEqual(before.hits.map((h) => h.id).sort())
    expect(again.hits[0]!.id).toBe(before.hits[0]!.id)
  })
})
