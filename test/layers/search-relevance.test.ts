import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"
import type { Leg } from "#layers/search/SpanIndex"
import { KINDS, relevanceSpans } from "../fixtures/search/relevance.ts"
import { type RunQuery, runQueryHalves, runSpans, type RunScores, scoreRuns } from "../fixtures/search/agentRuns.ts"
import { bm25, type Bm25Doc } from "../support/Bm25.ts"
import { createTestDatabase, type TestDatabase } from "../support/Database.ts"
import { uuid } from "../support/Fixtures.ts"
import {
  embeddedSearch,
  openSearchRuntime,
  type SearchedSpan,
  type SearchRuntime,
  storeIndexed
} from "../support/SearchRuntime.ts"

/**
 * The relevance harness: recall@10, MRR and nDCG@10 of the product's search and of a reference BM25 over the same
 * span texts, on the agent-runs set (tuning and held-out halves, lexical and paraphrase queries apart) and on the
 * older generated set. Runs on PGlite, or on PostgreSQL when TEST_DATABASE_URL is set.
 */

const open = openSearchRuntime
type Runtime = SearchRuntime

const NEW_ACCOUNT = uuid() as AccountId
const OLD_ACCOUNT = uuid() as AccountId
const runs = runSpans()
const old = relevanceSpans()

/** An identifier's words beside it (card_declined → card declined), as a keyword index would want them. */
const withIdentifierWords = (text: string) =>
  `${text} ${text.replace(/[_.:/-]+/g, " ").replace(/(\p{Ll})(\p{Lu})/gu, "$1 $2")}`

/** Stores the spans in one trace of the account, embeds them as the index job does; answers id → span text. */
const load = (runtime: Runtime, account: AccountId, spans: ReadonlyArray<Record<string, unknown>>) =>
  runtime.runPromise(
    Effect.map(
      storeIndexed(account, `search-${account}`, spans as unknown as ReadonlyArray<SearchedSpan>),
      (pending) => new Map(pending.map((p) => [p.spanId, p.text]))
    )
  )

/** PostgreSQL's english lexemes of each text with their counts (the stemming BM25 shares with full-text search). */
const lexemes = (runtime: Runtime, texts: ReadonlyArray<readonly [string, string]>) =>
  runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const records = JSON.stringify(texts.map(([id, body]) => ({ id, body: withIdentifierWords(body) })))
      const rows = yield* sql<{ id: string; lexeme: string; n: number }>`
      SELECT d.id, u.lexeme, cardinality(u.positions)::int AS n
      FROM jsonb_to_recordset(${records}::jsonb) AS d(id text, body text), unnest(to_tsvector('english', d.body)) AS u`
      const out = new Map<string, Map<string, number>>(texts.map(([id]) => [id, new Map()]))
      for (const r of rows) out.get(r.id)!.set(r.lexeme, Number(r.n))
      return out
    }).pipe(Effect.orDie)
  )

const searchIds = (runtime: Runtime, account: AccountId, query: string, legs?: ReadonlyArray<Leg>) =>
  runtime.runPromise(
    embeddedSearch({ accountId: account, query, limit: 10, ...(legs ? { legs } : {}) }).pipe(
      Effect.map(({ hits }) => hits.map((h) => h.span.id as string))
    )
  )

/** search: the product's hybrid ranking; vector and lexical: its legs alone; bm25: the reference keyword search. */
type System = "search" | "vector" | "lexical" | "bm25"
const SYSTEMS: ReadonlyArray<System> = ["search", "vector", "lexical", "bm25"]

let runtime: Runtime
let database: TestDatabase
/** system → query text → ranked span ids */
const ranked = new Map<System, Map<string, ReadonlyArray<string>>>(SYSTEMS.map((s) => [s, new Map()]))

beforeAll(async () => {
  database = await createTestDatabase()
  runtime = await open(database.env)
  const newTexts = await load(
    runtime,
    NEW_ACCOUNT,
    runs.map((r) => r.span)
  )
  const oldTexts = await load(
    runtime,
    OLD_ACCOUNT,
    old.map((r) => r.span)
  )
  const oldQueries = KINDS.flatMap((k) => [k.query, k.paraphrase])
  const sets: Array<[AccountId, Map<string, string>, ReadonlyArray<string>]> = [
    [
      NEW_ACCOUNT,
      newTexts,
      runQueryHalves()
        .tuning.concat(runQueryHalves().heldOut)
        .map((q) => q.text)
    ],
    [OLD_ACCOUNT, oldTexts, oldQueries]
  ]
  for (const [account, texts, queries] of sets) {
    const docTerms = await lexemes(runtime, [...texts])
    const queryTerms = await lexemes(
      runtime,
      queries.map((q) => [q, q] as const)
    )
    const rank = bm25([...docTerms].map(([id, terms]): Bm25Doc => ({ id, terms })))
    for (const q of queries) {
      ranked.get("bm25")!.set(q, rank([...queryTerms.get(q)!.keys()]))
      ranked.get("search")!.set(q, await searchIds(runtime, account, q))
      ranked.get("vector")!.set(q, await searchIds(runtime, account, q, ["vector"]))
      ranked.get("lexical")!.set(q, await searchIds(runtime, account, q, ["lexical"]))
    }
  }
}, 300_000)
afterAll(async () => {
  await runtime?.dispose()
  await database?.drop()
})

const scores = (system: System, queries: ReadonlyArray<RunQuery>): RunScores =>
  scoreRuns(queries, runs, (q) => ranked.get(system)!.get(q.text)!)

const fmt = (s: RunScores) =>
  `R@10 ${s.recallAt10.toFixed(3)}  MRR ${s.mrr.toFixed(3)}  nDCG@10 ${s.ndcgAt10.toFixed(3)}`

/** The old set: recall@10 over a kind's 9 spans and MRR, for its plain and its paraphrased queries. */
const oldScores = (system: System, which: "query" | "paraphrase") => {
  let recall = 0
  let rr = 0
  for (const kind of KINDS) {
    const relevant = new Set(old.filter((s) => s.kind === kind.key).map((s) => s.span.id as string))
    const top = ranked.get(system)!.get(kind[which])!.slice(0, 10)
    recall += top.filter((id) => relevant.has(id)).length / Math.min(10, relevant.size)
    const first = top.findIndex((id) => relevant.has(id))
    rr += first < 0 ? 0 : 1 / (first + 1)
  }
  return { recallAt10: recall / KINDS.length, mrr: rr / KINDS.length }
}

describe(`relevance on ${process.env.TEST_DATABASE_URL ? "PostgreSQL" : "PGlite"}`, () => {
  test("prints recall@10 and MRR per half and query style for each system, beside BM25", () => {
    const { heldOut, tuning } = runQueryHalves()
    const lines: Array<string> = [
      `agent-runs set: ${runs.length} spans, ${tuning.length} tuning + ${heldOut.length} held-out queries`
    ]
    for (const [half, queries] of [
      ["tuning", tuning],
      ["held-out", heldOut]
    ] as const) {
      for (const system of SYSTEMS) {
        for (const style of ["all", "lexical", "paraphrase"] as const) {
          const qs = style === "all" ? queries : queries.filter((q) => q.style === style)
          lines.push(
            `  ${half.padEnd(8)} ${system.padEnd(7)} ${style.padEnd(10)} (${String(qs.length).padStart(2)} q)  ${fmt(scores(system, qs))}`
          )
        }
      }
    }
    lines.push(`old generated set: ${old.length} spans, ${KINDS.length} kinds`)
    for (const system of SYSTEMS) {
      for (const which of ["query", "paraphrase"] as const) {
        const s = oldScores(system, which)
        lines.push(
          `  ${system.padEnd(7)} ${which.padEnd(10)}  R@10 ${s.recallAt10.toFixed(3)}  MRR ${s.mrr.toFixed(3)}`
        )
      }
    }
    console.log(lines.join("\n"))
    // The harness itself: every query was answered by every system.
    for (const system of SYSTEMS)
      expect(ranked.get(system)!.size).toBe(64 + 2 * KINDS.length - countDuplicateOldQueries())
  })
})

describe("hybrid retrieval", () => {
  test("on each half, recalls at least as much overall as either of its legs alone and as BM25", () => {
    const { heldOut, tuning } = runQueryHalves()
    for (const queries of [tuning, heldOut]) {
      const hybrid = scores("search", queries).recallAt10
      for (const other of ["vector", "lexical", "bm25"] as const) {
        expect(hybrid).toBeGreaterThanOrEqual(scores(other, queries).recallAt10)
      }
    }
  })
})

const countDuplicateOldQueries = () => KINDS.filter((k) => k.query === k.paraphrase).length
