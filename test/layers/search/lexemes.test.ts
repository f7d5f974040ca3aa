import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, FastCheck as fc } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { ftsText, LEXICAL_MIN_COVERAGE, lexicalQueryText } from "#layers/search/SpanIndex"
import { createTestDatabase, type TestDatabase } from "../../support/Database.ts"
import { uuid } from "../../support/Fixtures.ts"
import { embeddedSearch, openSearchRuntime, type SearchRuntime, storeIndexed } from "../../support/SearchRuntime.ts"

// The search row keeps its full-text lexemes as 32-bit hashes (layers/search/Lexemes.ts). Checked against
// PostgreSQL's own tsvector of the same text: as many hashes as distinct lexemes, each lexeme finding its span, and
// the lexical leg's ranking the BM25 idf sum over the log of the span's lexeme count, computed here from the tsvectors.

/** Few enough words that random texts share some (document frequencies above 1), with stems and stop words. */
const WORDS = [
  "ferry",
  "ferries",
  "booking",
  "booked",
  "timeout",
  "error",
  "card_declined",
  "the",
  "and",
  "retry",
  "database",
  "connection",
  "refused",
  "payment",
  "quokka",
  "lighthouse",
  "running",
  "runs",
  "getUserById",
  "ERR_TLS_CERT",
  "429",
  "départ",
  "über"
]
const word = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...WORDS) },
  { weight: 1, arbitrary: fc.stringMatching(/^[a-z][a-z0-9_]{0,11}$/) }
)
const text = fc.array(word, { minLength: 0, maxLength: 30 }).map((ws) => ws.join(" "))

let runtime: SearchRuntime
let database: TestDatabase

beforeAll(async () => {
  database = await createTestDatabase()
  runtime = await openSearchRuntime(database.env)
}, 120_000)
afterAll(async () => {
  await runtime.dispose()
  await database.drop()
})

/** The texts as tool spans of one trace of a new account, stored as the index job does; their ids and bodies. */
const load = (account: AccountId, texts: ReadonlyArray<string>) =>
  runtime.runPromise(
    Effect.map(
      storeIndexed(
        account,
        `lexemes-${account}`,
        texts.map((output, i) => ({
          id: uuid(),
          span_type: "tool_call",
          name: "tool",
          output,
          started_at: new Date(1_700_000_000_000 + i * 1000).toISOString(),
          cost: 0,
          duration_ms: 1
        }))
      ),
      (pending) => pending.map((p) => ({ id: p.spanId as string, body: ftsText(p.text) }))
    )
  )

/** PostgreSQL's english lexemes of a text (what a tsvector of it holds). */
const tsLexemes = (body: string) =>
  runtime.runPromise(
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql<{ l: Array<string> }>`SELECT tsvector_to_array(to_tsvector('english', ${body})) AS l`
    ).pipe(
      Effect.map((rows) => rows[0]!.l),
      Effect.orDie
    )
  )

const storedCounts = (account: AccountId) =>
  runtime.runPromise(
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql<{ id: string; n: number }>`
        SELECT span_id::text AS id, cardinality(lexemes)::int AS n FROM span_embeddings WHERE account_id = ${account}`
    ).pipe(
      Effect.map((rows) => new Map(rows.map((r) => [r.id, Number(r.n)]))),
      Effect.orDie
    )
  )

const lexical = (account: AccountId, query: string) =>
  runtime.runPromise(
    embeddedSearch({ accountId: account, query, limit: 50, legs: ["lexical"] }).pipe(
      Effect.map(({ hits }) => hits.map((h) => h.span.id as string))
    )
  )

/** The lexical leg's ranking computed from the spans' tsvectors: BM25 idf, coverage, the sum over the log of the count. */
const reference = (
  spans: ReadonlyArray<{ id: string; lexemes: ReadonlySet<string> }>,
  query: ReadonlyArray<string>
) => {
  const terms = [...new Set(query)].slice(0, 64)
  if (terms.length === 0) return []
  const n = spans.length
  const idf = new Map(
    terms.map((t) => {
      const df = spans.filter((s) => s.lexemes.has(t)).length
      return [t, Math.log(1 + (n - df + 0.5) / (df + 0.5))] as const
    })
  )
  const total = [...idf.values()].reduce((a, b) => a + b, 0)
  return spans
    .map((s) => {
      const sum = terms.filter((t) => s.lexemes.has(t)).reduce((a, t) => a + idf.get(t)!, 0)
      return { id: s.id, sum, relevance: Math.round((sum / Math.log(s.lexemes.size + 1)) * 1e6) }
    })
    .filter((s) => s.sum > 0 && s.sum >= LEXICAL_MIN_COVERAGE * total)
    .sort((a, b) => b.relevance - a.relevance || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map((s) => s.id)
}

describe("hashed lexemes", () => {
  test("a span stores one hash per distinct lexeme of its text, and each of its words finds it in the lexical leg", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(text, { minLength: 1, maxLength: 6 }), async (texts) => {
        const account = uuid() as AccountId
        const spans = await load(account, texts)
        const counts = await storedCounts(account)
        for (const span of spans) {
          const lexemes = await tsLexemes(span.body)
          expect(counts.get(span.id)).toBe(lexemes.length)
        }
        for (const w of new Set(texts.flatMap((t) => t.split(" ")).filter((w) => w !== ""))) {
          const holders = []
          const query = await tsLexemes(lexicalQueryText(w))
          if (query.length === 0) continue
          for (const span of spans) {
            const lexemes = new Set(await tsLexemes(span.body))
            if (query.every((l) => lexemes.has(l))) holders.push(span.id)
          }
          const found = await lexical(account, w)
          for (const id of holders) expect(found).toContain(id)
        }
      }),
      { numRuns: 12 }
    )
  }, 300_000)

  test("the lexical leg ranks as the BM25 idf sum over the log of the span's lexeme count, from the tsvectors", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(text, { minLength: 2, maxLength: 12 }),
        fc.array(word, { minLength: 1, maxLength: 4 }),
        async (texts, words) => {
          const account = uuid() as AccountId
          const stored = await load(account, texts)
          const spans = await Promise.all(
            stored.map(async (s) => ({ id: s.id, lexemes: new Set(await tsLexemes(s.body)) }))
          )
          const query = words.join(" ")
          expect(await lexical(account, query)).toEqual(reference(spans, await tsLexemes(lexicalQueryText(query))))
        }
      ),
      { numRuns: 60 }
    )
  }, 300_000)
})
