import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, FastCheck as fc } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { Embedder } from "#layers/search/Embedder"
import { ftsText, type Leg, RRF_K, SpanIndex } from "#layers/search/SpanIndex"
import { spanText } from "#src/domain/search/SpanText"
import { KINDS, relevanceSpans } from "../fixtures/search/relevance.ts"
import { INT8_COSINE_TOLERANCE } from "../support/SearchTolerance.ts"
import { createTestDatabase, type TestDatabase } from "../support/Database.ts"
import { uuid } from "../support/Fixtures.ts"
import { embeddedSearch, openSearchRuntime, type SearchRuntime } from "../support/SearchRuntime.ts"

const open = openSearchRuntime
type Runtime = SearchRuntime

const spans = relevanceSpans()
const ACCOUNT = uuid() as AccountId
const TRACE = uuid()

/** The relevance spans in one trace of one account, embedded and stored as the index job does it. */
const load = (runtime: Runtime) =>
  runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const index = yield* SpanIndex
      const embedder = yield* Embedder
      yield* sql`INSERT INTO accounts (id, name) VALUES (${ACCOUNT}, ${`search-${ACCOUNT}`})`
      yield* sql`INSERT INTO traces (id, account_id, status, started_at) VALUES (${TRACE}, ${ACCOUNT}, 'completed', now())`
      for (const { span } of spans) {
        yield* sql`
        INSERT INTO spans (trace_id, id, account_id, span_type, name, model, input, output, error, started_at, cost, duration_ms)
        VALUES (${TRACE}, ${span.id as string}, ${ACCOUNT}, ${span.span_type as string}, ${span.name as string},
                ${(span.model as string) ?? null}, ${span.input === undefined ? null : JSON.stringify(span.input)}::jsonb,
                ${span.output === undefined ? null : JSON.stringify(span.output)}::jsonb, ${(span.error as string) ?? null},
                ${span.started_at as string}, ${span.cost as number}, ${span.duration_ms as number})`
      }
      const { filtersStale, pending } = yield* index.pendingOfTraces(ACCOUNT, [TRACE], embedder.id)
      expect(pending.length).toBe(spans.length)
      expect(filtersStale).toEqual([])
      yield* index.store(embedder.id, pending, yield* embedder.embed(pending.map((p) => p.text)))
      // Indexing again finds nothing to do: the texts did not change, and the vectors copied the filterable fields.
      expect(yield* index.pendingOfTraces(ACCOUNT, [TRACE], embedder.id)).toEqual({ pending: [], filtersStale: [] })
    }).pipe(Effect.orDie)
  )

type Path = "exact" | "hnsw" | undefined
const top = (
  runtime: Runtime,
  query: string,
  options: { path?: Path; filters?: any; limit?: number; legs?: ReadonlyArray<Leg> } = {}
) =>
  runtime.runPromise(
    embeddedSearch({
      accountId: ACCOUNT,
      query,
      filters: options.filters,
      limit: options.limit ?? 10,
      ...(options.path === undefined ? {} : { path: options.path }),
      ...(options.legs === undefined ? {} : { legs: options.legs })
    }).pipe(
      Effect.map(({ hits }) =>
        hits.map((h) => ({ id: h.span.id as string, similarity: h.span.similarity, score: h.span.score }))
      )
    )
  )

const expectSame = (
  a: ReadonlyArray<{ id: string; similarity: number }>,
  b: ReadonlyArray<{ id: string; similarity: number }>
) => {
  expect(a.map((h) => h.id)).toEqual(b.map((h) => h.id))
  a.forEach((h, i) => expect(Math.abs(h.similarity - b[i]!.similarity)).toBeLessThan(1e-4))
}

/**
 * The same ranking up to near-ties: a span both answers hold has similarities within INT8_COSINE_TOLERANCE, so do
 * the answers' similarities place by place, and a span only one answer holds is within the tolerance of the other
 * answer's last (it was a near-tie at the page's end).
 */
const expectAlike = (
  a: ReadonlyArray<{ id: string; similarity: number }>,
  b: ReadonlyArray<{ id: string; similarity: number }>
) => {
  expect(b.length).toBe(a.length)
  a.forEach((h, i) => expect(Math.abs(h.similarity - b[i]!.similarity)).toBeLessThan(INT8_COSINE_TOLERANCE))
  for (const [x, y] of [
    [a, b],
    [b, a]
  ] as const) {
    const other = new Map(y.map((h) => [h.id, h.similarity]))
    const last = y[y.length - 1]?.similarity ?? 0
    for (const h of x) {
      const s = other.get(h.id)
      expect(Math.abs(h.similarity - (s ?? last))).toBeLessThan(INT8_COSINE_TOLERANCE)
    }
  }
}

let pglite: Runtime
let postgres: Runtime | undefined
let database: TestDatabase | undefined
beforeAll(async () => {
  pglite = await open({ TAPEDECK_DATA_DIR: "memory://" })
  await load(pglite)
  if (process.env.TEST_DATABASE_URL) {
    database = await createTestDatabase()
    postgres = await open(database.env)
    await load(postgres)
  }
}, 120_000)
afterAll(async () => {
  await pglite.dispose()
  await postgres?.dispose()
  await database?.drop()
})

describe("index paths", () => {
  test("PGlite uses pgvector with HNSW; PostgreSQL without pgvector the exact fallback", async () => {
    expect(await pglite.runPromise(Effect.flatMap(SpanIndex, (i) => i.mode))).toBe("pgvector-hnsw")
    const indexes = await pglite.runPromise(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ indexdef: string }>`SELECT indexdef FROM pg_indexes WHERE tablename = 'span_embeddings'`
      ).pipe(Effect.orDie)
    )
    expect(indexes.some((i) => i.indexdef.includes("hnsw") && i.indexdef.includes("vector_cosine_ops"))).toBe(true)
    if (postgres) expect(await postgres.runPromise(Effect.flatMap(SpanIndex, (i) => i.mode))).toBe("exact-fallback")
  })

  test("HNSW and the exact scan give the same top results (with and without filters)", async () => {
    for (const kind of KINDS) {
      expectSame(await top(pglite, kind.query, { path: "hnsw" }), await top(pglite, kind.query, { path: "exact" }))
      // The chosen path (the exact one here: a small account) agrees too.
      expectSame(await top(pglite, kind.query), await top(pglite, kind.query, { path: "exact" }))
    }
    const filters = { span_type: "tool_call", min_cost: 0.02 }
    for (const kind of KINDS.slice(0, 12)) {
      expectSame(
        await top(pglite, kind.query, { filters, path: "hnsw" }),
        await top(pglite, kind.query, { filters, path: "exact" })
      )
    }
  }, 60_000)

  test("the filtered HNSW scan alone equals the exact scan, for broad and selective filters of every kind", async () => {
    const match = (f: Record<string, unknown>) =>
      spans.filter(
        ({ span }) =>
          (f.span_type === undefined || span.span_type === f.span_type) &&
          (f.model === undefined || span.model === f.model) &&
          (f.min_cost === undefined || (span.cost as number) >= (f.min_cost as number)) &&
          (f.min_duration_ms === undefined || (span.duration_ms as number) >= (f.min_duration_ms as number))
      ).length
    const filterSets: Array<Record<string, unknown>> = [
      { status: "completed" }, // every span
      { span_type: "llm_call" }, // broad
      { min_cost: 0.01 },
      { model: "claude-haiku" },
      { span_type: "error" },
      { model: "llama-3-8b", min_cost: 0.09 }, // selective
      { min_duration_ms: 9_000 },
      { span_type: "tool_call", min_cost: 0.05, min_duration_ms: 2_000 }
    ]
    for (const filters of filterSets) {
      const expected = filters.status === undefined ? match(filters) : spans.length
      for (const kind of KINDS.slice(0, 6)) {
        const hnsw = await top(pglite, kind.query, { filters, path: "hnsw", limit: 100 })
        const exact = await top(pglite, kind.query, { filters, path: "exact", limit: 100 })
        expectSame(hnsw, exact)
        expect(hnsw.length).toBe(Math.min(100, expected))
      }
    }
  }, 60_000)

  test("PGlite (pgvector) and PostgreSQL (exact fallback) give the same top results on the same data", async () => {
    if (!postgres) {
      console.log("index paths: set TEST_DATABASE_URL to compare with a PostgreSQL without pgvector")
      return
    }
    // The vector leg alone: the same ranking and cosines up to the storage's precision (PostgreSQL keeps one byte a
    // component, PGlite half precision: cosines within INT8_COSINE_TOLERANCE, near-twins may swap). The fused
    // ranking: its lexical leg depends on the english stemmer, which differs between the major versions (PostgreSQL
    // 15 stems "added" to "ad", PGlite's 17 to "add"), and its rank divides by the span's lexeme count, so a span of
    // the kind can move across the page's end: the first hit is the same (or a near-tie, below), and the pages share
    // at least 9 of their 10 spans.
    const vector = ["vector"] as const
    for (const kind of KINDS) {
      expectAlike(await top(pglite, kind.query, { legs: vector }), await top(postgres, kind.query, { legs: vector }))
      expectAlike(
        await top(pglite, kind.paraphrase, { filters: { model: "claude-haiku" }, legs: vector }),
        await top(postgres, kind.paraphrase, { filters: { model: "claude-haiku" }, legs: vector })
      )
      const [a, b] = [await top(pglite, kind.query), await top(postgres, kind.query)]
      // The first hit is the same, or the two first hits were a near-tie in the fusion: their fused scores on one
      // backend differ by less than one place's move at the top of one leg (a near-twin's vector rank can swap).
      if (a[0]!.id !== b[0]!.id) {
        const other = a.find((h) => h.id === b[0]!.id)
        expect(other).toBeDefined()
        expect(a[0]!.score - other!.score).toBeLessThan(1 / (RRF_K + 1) - 1 / (RRF_K + 2))
      }
      const ids = new Set(b.map((h) => h.id))
      expect(a.filter((h) => ids.has(h.id)).length).toBeGreaterThanOrEqual(Math.min(a.length, b.length) - 1)
    }
  }, 60_000)

  test("a selective filter still returns every match through HNSW (no results lost to the index scan)", async () => {
    const filters = { model: "llama-3-8b", min_cost: 0.09 }
    const matching = spans
      .filter((s) => s.span.model === "llama-3-8b" && (s.span.cost as number) >= 0.09)
      .map((s) => s.span.id)
    expect(matching.length).toBeGreaterThan(0)
    for (const path of [undefined, "hnsw", "exact"] as const) {
      const hits = await top(pglite, "weather in Berlin", { filters, limit: 100, path })
      expect(hits.map((h) => h.id).sort()).toEqual([...matching].sort() as Array<string>)
    }
  })

  test("a span's filterable fields changed without its text reach the index with the next index job", async () => {
    for (const runtime of [pglite, ...(postgres ? [postgres] : [])]) {
      const target = spans.find(({ span }) => (span.cost as number) < 0.05)!.span
      const filters = { min_cost: 5, span_type: target.span_type }
      expect(await top(runtime, "anything", { filters })).toEqual([])
      await runtime.runPromise(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const index = yield* SpanIndex
          const embedder = yield* Embedder
          yield* sql`UPDATE spans SET cost = 7 WHERE trace_id = ${TRACE} AND id = ${target.id as string}`
          // The text did not change: nothing to re-embed, only the copy of the cost to sync.
          const { filtersStale, pending } = yield* index.pendingOfTraces(ACCOUNT, [TRACE], embedder.id)
          expect(pending).toEqual([])
          expect(filtersStale).toEqual([{ traceId: TRACE, spanId: target.id as string }])
          yield* index.syncFilters(ACCOUNT, filtersStale)
          expect((yield* index.pendingOfTraces(ACCOUNT, [TRACE], embedder.id)).filtersStale).toEqual([])
        }).pipe(Effect.orDie)
      )
      for (const path of [undefined, "exact"] as const) {
        expect((await top(runtime, "anything", { filters, path })).map((h) => h.id)).toEqual([target.id as string])
      }
      await runtime.runPromise(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE spans SET cost = ${target.cost as number} WHERE trace_id = ${TRACE} AND id = ${target.id as string}`
          const index = yield* SpanIndex
          yield* index.syncFilters(
            ACCOUNT,
            (yield* index.pendingOfTraces(ACCOUNT, [TRACE], (yield* Embedder).id)).filtersStale
          )
        }).pipe(Effect.orDie)
      )
      expect(await top(runtime, "anything", { filters })).toEqual([])
    }
  })
})

describe("full-text input", () => {
  /** The text followed by a copy with its identifiers split (what a keyword index would want at least). */
  const textTwice = (text: string) =>
    `${text}\n${text.replace(/[_.:/-]+/g, " ").replace(/(\p{Ll})(\p{Lu})/gu, "$1 $2")}`

  const texts = [
    ...spans.map(({ span }) =>
      spanText({
        name: span.name as string,
        span_type: span.span_type as string,
        model: (span.model as string) ?? null,
        error: (span.error as string) ?? null,
        input: span.input ?? null,
        output: span.output ?? null
      })
    ),
    "getUserById failed: GET /api/v1/users/42 → 429 rate-limited by api.example.com (retry_after=30s)",
    "snake_case.module:func CamelCaseHTTPServer x-request-id user@example.com v1.2.3 ../a/b_c.py\tTAB\nnew_line",
    "plain words only, nothing to split"
  ]
  const lexemes = (runtime: Runtime, text: string) =>
    runtime.runPromise(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ l: Array<string> }>`SELECT tsvector_to_array(to_tsvector('english', ${text})) AS l`
      ).pipe(
        Effect.map((rows) => rows[0]!.l),
        Effect.orDie
      )
    )

  test("indexes every lexeme of the text and of its identifiers split, and each identifier whole", async () => {
    for (const runtime of [pglite, ...(postgres ? [postgres] : [])]) {
      for (const text of texts) {
        const got = new Set(await lexemes(runtime, ftsText(text)))
        for (const l of await lexemes(runtime, textTwice(text))) expect(got).toContain(l)
      }
      const got = await lexemes(
        runtime,
        ftsText("stripe said card_declined; ERR_TLS_CERT_ALTNAME_INVALID in getUserById")
      )
      for (const whole of ["carddeclin", "errtlscertaltnameinvalid", "getuserbyid"]) expect(got).toContain(whole)
    }
  })

  test("is the text, then the words and the whole form of each distinct identifier among its whitespace-delimited tokens", () => {
    // The definition, written with regexes; ftsText finds the tokens by a pass over the character codes.
    const reference = (text: string) => {
      const words = new Set<string>()
      for (const token of new Set([...text.matchAll(/\S+/g)].map((m) => m[0]))) {
        if (!/[_.:/-]|\p{Ll}\p{Lu}/u.test(token)) continue
        words.add(token.replace(/[_.:/-]+/g, " ").replace(/(\p{Ll})(\p{Lu})/gu, "$1 $2"))
        const identifiers = token.matchAll(
          /[\p{L}\p{N}]+(?:[_.-][\p{L}\p{N}]+)+|\p{Ll}[\p{Ll}\p{N}]*(?:\p{Lu}[\p{Ll}\p{N}]*)+/gu
        )
        for (const [identifier] of identifiers) {
          const whole = identifier.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, "")
          if (whole.length >= 3 && whole.length <= 64) words.add(whole)
        }
      }
      return words.size === 0 ? text : `${text}\n${[...words].join(" ")}`
    }
    const unit = fc.oneof(
      fc.constantFrom(
        " ",
        "\u00a0",
        "\u2028",
        "\u3000",
        "\ufeff",
        "\t",
        "\r\n",
        "\v",
        "\f",
        "_",
        ".",
        ":",
        "/",
        "-",
        "é",
        "É",
        "ß",
        "Ω",
        "ω"
      ),
      fc.string({ unit: "grapheme", maxLength: 3 }),
      fc.stringMatching(/^[A-Za-z0-9_.:/-]{1,8}$/)
    )
    fc.assert(
      fc.property(
        fc.array(unit, { maxLength: 40 }).map((units) => units.join("")),
        (text) => {
          expect(ftsText(text)).toBe(reference(text))
        }
      ),
      { numRuns: 2000 }
    )
    for (const text of texts) expect(ftsText(text)).toBe(reference(text))
  })

  test("keeps every lexeme of the text and its split identifiers, on any text of words, identifiers and punctuation", async () => {
    const piece = fc.oneof(
      fc.constantFrom(
        "error",
        "Timeout",
        "getUserById",
        "snake_case",
        "api.example.com",
        "/v1/x-y",
        "a:b",
        "HTTPServer",
        "rate-limited",
        "user@example.com",
        "v1.2.3",
        "naïve_Ünïcode",
        "x",
        "_",
        ".",
        "--",
        "::",
        "É"
      ),
      fc.stringMatching(/^[A-Za-z0-9_.:/-]{1,12}$/)
    )
    const separator = fc.constantFrom(" ", "  ", "\n", "\t", ", ", "; ")
    const text = fc
      .array(fc.tuple(piece, separator), { minLength: 1, maxLength: 30 })
      .map((parts) => parts.map(([p, s]) => p + s).join(""))
    for (const runtime of [pglite, ...(postgres ? [postgres] : [])]) {
      await fc.assert(
        fc.asyncProperty(text, async (t) => {
          const got = new Set(await lexemes(runtime, ftsText(t)))
          for (const l of await lexemes(runtime, textTwice(t))) expect(got).toContain(l)
        }),
        { numRuns: 150 }
      )
    }
  }, 60_000)
})
