/**
 * Search benchmark (not a test file: run it with `bun test/bench/search.ts`).
 *
 * For each backend — the real PostgreSQL on BENCH_DATABASE_URL's server (no pgvector there: the exact fallback)
 * and an embedded PGlite (pgvector, HNSW) in a temporary directory — in this process, through the service's own
 * layers (SpanIndex, the offline embedder):
 * 1. Writes BENCH_SEARCH_SPANS spans (default 100,000) in one account, in traces of 1,000, generated from the
 *    relevance templates (test/fixtures/search) with random fills, so texts vary like real spans.
 * 2. Indexes them as the `search.index` job does (read a trace's spans, build texts, embed, store vectors and
 *    full-text vectors, the HNSW index already in place): spans/s embedded and stored.
 * 3. Runs BENCH_SEARCH_QUERIES queries (the relevance set's queries and paraphrases, round-robin) without filters,
 *    then with filters (span_type; model + date range; min_cost), sequentially: p50/p95/p99 per kind. With HNSW,
 *    also how much of the exact path's answer the service's answer holds (each distinct query once, compared by
 *    similarity, since generated spans with the same text tie).
 *    Without pgvector (the sign-bit prefilter and exact re-rank), the first BENCH_SEARCH_FALLBACK_QUERIES of each
 *    kind also run the exact scan right after (alternated, same run): its p50/p95 beside the prefilter's, and how
 *    much of its answer the prefilter's holds.
 * 4. Measures the offline embedder's resident memory in a child process (RSS after loading and embedding,
 *    minus the same process before loading).
 * Prints a markdown table. Knobs: BENCH_DATABASE_URL, BENCH_SEARCH_SPANS, BENCH_SEARCH_QUERIES, BENCH_SEARCH_BACKENDS
 * (comma-separated: postgresql,pglite), BENCH_SEARCH_LEGS (comma-separated: lexical,vector; one alone times that
 * leg, the exact scan and agreement columns then meaningless for the lexical one), BENCH_SEARCH_PGLITE_DIR (a directory kept for the PGlite database: the first
 * run writes and indexes the spans there, later runs only query them; the indexing rate is then not measured).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { BunContext } from "@effect/platform-bun"
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime, Schema } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { SearchFilters } from "#src/domain/Search"
import { Embedder } from "#layers/search/Embedder"
import { SearchDependenciesLive } from "#layers/search/SearchLive"
import { type Leg, SpanIndex } from "#layers/search/SpanIndex"
import { maintainTables } from "#layers/storage/EmbeddedMaintenance"
import { StorageLive } from "#layers/storage/Sql"
import { KINDS } from "../fixtures/search/relevance.ts"
import {
  commandLine,
  fmtInt,
  fmtMs,
  freshDatabase,
  latencyStats,
  log,
  numberEnv,
  onCleanup,
  ROOT,
  runBench
} from "./Harness.ts"

const SPANS = numberEnv("BENCH_SEARCH_SPANS", 100_000)
const QUERIES = numberEnv("BENCH_SEARCH_QUERIES", 200)
/**
 * Without pgvector, the exact scan (the ceiling the sign-bit prefilter replaces) takes seconds per query at 100k
 * spans: it runs this many queries, each right after the served path's same query.
 */
const FALLBACK_QUERIES = numberEnv("BENCH_SEARCH_FALLBACK_QUERIES", 10)
const BACKENDS = (process.env.BENCH_SEARCH_BACKENDS || "postgresql,pglite").split(",").map((s) => s.trim())
/** The legs the queries run (`lexical`, `vector`; both by default): one alone times that leg. */
const LEGS = (process.env.BENCH_SEARCH_LEGS || "lexical,vector").split(",").map((s) => s.trim() as Leg)
const TRACE_SIZE = 1000

let seed = 42
const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32
const pick = <A>(xs: ReadonlyArray<A>) => xs[Math.floor(random() * xs.length)]!
const FILLS = [
  "Lisbon",
  "Kyoto",
  "acme",
  "orders",
  "visa",
  "github",
  "Berlin",
  "quicksort",
  "contract.pdf",
  "AAPL",
  "Rome",
  "billing"
]
const MODELS = ["gpt-4o-mini", "claude-haiku", "llama-3-8b", "gpt-4o"]
const fill = (value: unknown, x: string): unknown =>
  typeof value === "string"
    ? value.replaceAll("{x}", x)
    : Array.isArray(value)
      ? value.map((v) => fill(v, x))
      : value !== null && typeof value === "object"
        ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, x)]))
        : value

const makeSpan = (n: number) => {
  const kind = pick(KINDS)
  const t = pick(kind.templates)
  const x = `${pick([...kind.fills, ...FILLS])} ${n % 997}`
  return {
    id: crypto.randomUUID(),
    span_type: t.type,
    name: fill(t.name, x) as string,
    model: t.type === "llm_call" ? pick(MODELS) : null,
    input: t.input === undefined ? null : JSON.stringify(fill(t.input, x)),
    output: t.output === undefined ? null : JSON.stringify(fill(t.output, x)),
    error: t.error === undefined ? null : (fill(t.error, x) as string),
    started_at: new Date(Date.UTC(2026, 0, 1) + Math.floor(random() * 90 * 86_400_000)).toISOString(),
    cost: Math.round(random() * 1000) / 10_000,
    duration_ms: Math.floor(random() * 10_000)
  }
}

const open = async (env: Record<string, string>) => {
  const runtime = ManagedRuntime.make(
    SearchDependenciesLive.pipe(
      Layer.provideMerge(StorageLive),
      Layer.provide(BunContext.layer),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
    )
  )
  await runtime.runPromise(runtime.runtimeEffect)
  onCleanup(() => runtime.dispose())
  return runtime
}

/** An indexed PGlite directory kept by an earlier run (BENCH_SEARCH_PGLITE_DIR): its account, to query again. */
const keptAccount = (dir: string | undefined): AccountId | undefined => {
  const marker = dir === undefined ? undefined : join(dir, "bench-search.json")
  return marker !== undefined && existsSync(marker) ? JSON.parse(readFileSync(marker, "utf8")).account : undefined
}

const measure = async (backend: string, env: Record<string, string>, keepDir?: string) => {
  const runtime = await open(env)
  const kept = keptAccount(keepDir)
  const account = kept ?? (crypto.randomUUID() as AccountId)
  const traceIds: Array<string> = []
  const run = <A>(effect: Effect.Effect<A, unknown, SqlClient.SqlClient | SpanIndex | Embedder>) =>
    runtime.runPromise(Effect.orDie(effect))

  if (kept !== undefined) log(`${backend}: reusing the spans indexed in ${keepDir} (account ${kept})`)
  else {
    log(`${backend}: writing ${fmtInt(SPANS)} spans`)
    await run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO accounts (id, name) VALUES (${account}, ${`bench-${account}`})`
        for (let written = 0; written < SPANS; written += TRACE_SIZE) {
          const traceId = crypto.randomUUID()
          traceIds.push(traceId)
          const spans = Array.from({ length: Math.min(TRACE_SIZE, SPANS - written) }, (_, i) => makeSpan(written + i))
          yield* sql`INSERT INTO traces (id, account_id, status, started_at) VALUES (${traceId}, ${account}, ${pick(["completed", "failed", "running"])}, now())`
          yield* sql`
          INSERT INTO spans (trace_id, id, account_id, span_type, name, model, input, output, error, started_at, cost, duration_ms)
          SELECT ${traceId}::uuid, x.id, ${account}::uuid, x.span_type, x.name, x.model, x.input::jsonb, x.output::jsonb,
                 x.error, x.started_at, x.cost, x.duration_ms
          FROM jsonb_to_recordset(${JSON.stringify(spans)}::jsonb) AS x(id uuid, span_type text, name text, model text,
            input text, output text, error text, started_at timestamptz, cost numeric, duration_ms bigint)`
        }
      })
    )
    log(`${backend}: indexing`)
  }
  let embedMs = 0
  const started = performance.now()
  for (const [i, traceId] of traceIds.entries()) {
    await run(
      Effect.gen(function* () {
        const index = yield* SpanIndex
        const embedder = yield* Embedder
        const { pending } = yield* index.pendingOfTraces(account, [traceId], embedder.id)
        for (let j = 0; j < pending.length; j += embedder.maxBatch) {
          const batch = pending.slice(j, j + embedder.maxBatch)
          const t0 = performance.now()
          const vectors = yield* embedder.embed(batch.map((p) => p.text))
          embedMs += performance.now() - t0
          yield* index.store(embedder.id, batch, vectors)
        }
      })
    )
    if ((i + 1) % 20 === 0) log(`${backend}: indexed ${fmtInt((i + 1) * TRACE_SIZE)}`)
  }
  const indexSeconds = (performance.now() - started) / 1000
  if (keepDir !== undefined && kept === undefined)
    writeFileSync(join(keepDir, "bench-search.json"), JSON.stringify({ account }))
  // Planner statistics, as a running service has them: PostgreSQL's autovacuum would have analysed these tables
  // by now; embedded PGlite has no autovacuum, and the service's own maintenance pass (every minute) does it.
  if (backend === "postgresql") {
    await run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`VACUUM ANALYZE span_embeddings, traces`))
  } else {
    log(`${backend}: embedded maintenance: ${(await run(maintainTables)).join(", ") || "nothing due"}`)
  }
  const mode = await run(Effect.flatMap(SpanIndex, (i) => i.mode))

  const queries = KINDS.flatMap((k) => [k.query, k.paraphrase])
  const filterSets: Record<string, unknown> = {
    "no filter": undefined,
    span_type: { span_type: "tool_call" },
    "model + dates": { model: "claude-haiku", date_from: "2026-02-01T00:00:00Z", date_to: "2026-02-28T00:00:00Z" },
    "min_cost + status": { min_cost: 0.09, status: "failed" }
  }
  const latencies: Record<string, ReturnType<typeof latencyStats>> = {}
  const counts: Record<string, number> = {}
  const agreement: Record<string, number> = {}
  const exactLatencies: Record<string, ReturnType<typeof latencyStats>> = {}
  const queryCount = QUERIES
  const search = (query: string, filters: unknown, path?: "exact") =>
    run(
      Effect.gen(function* () {
        const index = yield* SpanIndex
        const embedder = yield* Embedder
        const [vector] = yield* embedder.embed([query])
        return yield* index.search({
          accountId: account,
          embedder: embedder.id,
          query,
          vector: vector!,
          // Filters are passed decoded (dates as DateTime), as the HTTP layer hands them over.
          filters: filters === undefined ? undefined : Schema.decodeUnknownSync(SearchFilters)(filters),
          limit: 20,
          offset: 0,
          legs: LEGS,
          ...(path === undefined ? {} : { path })
        })
      })
    )
  for (const [label, filters] of Object.entries(filterSets)) {
    const samples: Array<number> = []
    let returned = 0
    const exactSamples: Array<number> = []
    let matchedFallback = 0
    let expectedFallback = 0
    for (let i = 0; i < queryCount; i++) {
      const t0 = performance.now()
      const hits = await search(queries[i % queries.length]!, filters)
      samples.push(performance.now() - t0)
      returned += hits.length
      if (mode === "exact-fallback" && i < FALLBACK_QUERIES) {
        // The exact scan the prefilter replaces, the same query right after (A/B alternated): its latency, and the
        // share of its answer's similarities the served answer holds.
        const t1 = performance.now()
        const exact = (await search(queries[i % queries.length]!, filters, "exact")).map((h) =>
          h.span.similarity.toFixed(6)
        )
        exactSamples.push(performance.now() - t1)
        const served = hits.map((h) => h.span.similarity.toFixed(6))
        for (const similarity of exact) {
          const at = served.indexOf(similarity)
          if (at >= 0) {
            served.splice(at, 1)
            matchedFallback++
          }
        }
        expectedFallback += exact.length
      }
    }
    latencies[label] = latencyStats(samples)
    if (exactSamples.length > 0) {
      exactLatencies[label] = latencyStats(exactSamples)
      agreement[label] = expectedFallback === 0 ? 1 : matchedFallback / expectedFallback
      log(
        `${backend}: ${label}: exact scan p50 ${fmtMs(exactLatencies[label]!.p50)} p95 ${fmtMs(exactLatencies[label]!.p95)}; agreement ${agreement[label]!.toFixed(3)}`
      )
    }
    counts[label] = returned / queryCount
    log(`${backend}: ${label}: p50 ${fmtMs(latencies[label]!.p50)} p95 ${fmtMs(latencies[label]!.p95)}`)
    if (mode !== "exact-fallback") {
      // What the approximate index costs in quality: each distinct query once, the service's answer against the
      // exact path's. Spans with identical vectors tie (the generated texts repeat), so a hit counts by its
      // similarity: the share of the exact answer's similarities the service's answer also holds.
      let matched = 0
      let expected = 0
      for (const query of queries) {
        const served = (await search(query, filters)).map((h) => h.span.similarity.toFixed(6))
        const exact = (await search(query, filters, "exact")).map((h) => h.span.similarity.toFixed(6))
        for (const similarity of exact) {
          const at = served.indexOf(similarity)
          if (at >= 0) {
            served.splice(at, 1)
            matched++
          }
        }
        expected += exact.length
      }
      agreement[label] = expected === 0 ? 1 : matched / expected
      log(`${backend}: ${label}: agreement with the exact path ${agreement[label]!.toFixed(3)}`)
    }
  }
  await runtime.dispose()
  return {
    backend,
    mode,
    exactLatencies,
    indexRate: kept === undefined ? SPANS / indexSeconds : Number.NaN,
    embedRate: kept === undefined ? SPANS / (embedMs / 1000) : Number.NaN,
    latencies,
    counts,
    agreement
  }
}

/** RSS of a child process that loads the offline embedder and embeds 1,000 texts, minus its RSS before loading. */
const embedderRss = async () => {
  const script = `
    import { loadWordVectors } from "${ROOT}/layers/search/WordVectors.ts"
    import { makeOfflineEmbedding } from "${ROOT}/layers/search/OfflineEmbedder.ts"
    Bun.gc(true)
    const before = process.memoryUsage().rss
    const embed = makeOfflineEmbedding(await loadWordVectors(".tapedeck"))
    for (let i = 0; i < 1000; i++) embed("request to the inventory service timed out after " + i + " seconds; gave up")
    Bun.gc(true)
    const after = process.memoryUsage().rss
    console.log(JSON.stringify({ before, after }))`
  const child = Bun.spawn(["bun", "-e", script], { cwd: ROOT, stdout: "pipe", stderr: "inherit" })
  const out = await new Response(child.stdout).text()
  await child.exited
  return JSON.parse(out.trim().split("\n").at(-1)!) as { before: number; after: number }
}

runBench(async () => {
  const results: Array<Awaited<ReturnType<typeof measure>>> = []
  for (const backend of BACKENDS) {
    if (backend === "postgresql") {
      const { databaseUrl } = await freshDatabase("tapedeck_bench_search_")
      results.push(await measure(backend, { DATABASE_URL: databaseUrl, TAPEDECK_DATA_DIR: join(ROOT, ".tapedeck") }))
    } else if (backend === "pglite") {
      const keep = process.env.BENCH_SEARCH_PGLITE_DIR
      const dir = keep ?? mkdtempSync(join(tmpdir(), "tapedeck-bench-search-"))
      if (keep === undefined) onCleanup(async () => rmSync(dir, { recursive: true, force: true }))
      results.push(await measure(backend, { TAPEDECK_DATA_DIR: dir }, keep))
    } else throw new Error(`unknown backend ${backend}`)
  }
  const rss = await embedderRss()

  console.log(
    `\n### Search: ${fmtInt(SPANS)} spans in one account, ${fmtInt(QUERIES)} queries per row (${fmtInt(FALLBACK_QUERIES)} on the exact fallback), limit 20\n`
  )
  console.log(
    "| backend | index | indexing (spans/s embedded + stored) | filter | p50 | p95 | p99 | hits/query | top 20 as exact |"
  )
  console.log("|---|---|---|---|---|---|---|---|---|")
  for (const r of results) {
    for (const [label, l] of Object.entries(r.latencies)) {
      const agreement = r.agreement[label]
      const index = r.mode === "exact-fallback" ? "sign-bit prefilter + exact re-rank" : r.mode
      console.log(
        `| ${r.backend} | ${index} | ${Number.isFinite(r.indexRate) ? fmtInt(r.indexRate) : "— (kept)"} | ${label} | ${fmtMs(l.p50)} | ${fmtMs(l.p95)} | ${fmtMs(l.p99)} | ${r.counts[label]!.toFixed(1)} | ${agreement === undefined ? "exact" : agreement.toFixed(3)} |`
      )
      const exact = r.exactLatencies[label]
      if (exact !== undefined) {
        console.log(
          `| ${r.backend} | exact scan (the ceiling it replaces, ${fmtInt(FALLBACK_QUERIES)} queries) | | ${label} | ${fmtMs(exact.p50)} | ${fmtMs(exact.p95)} | ${fmtMs(exact.p99)} | | exact |`
        )
      }
    }
  }
  const embedRate = results.map((r) => fmtInt(r.embedRate)).join(" / ")
  console.log(
    `\nOffline embedder alone: ${embedRate} spans/s (per backend run); resident memory of the embedder: ` +
      `${((rss.after - rss.before) / 1e6).toFixed(0)} MB (process RSS ${(rss.after / 1e6).toFixed(0)} MB with the Bun runtime)`
  )
  console.log(
    `\nCommand: ${commandLine(["BENCH_DATABASE_URL", "BENCH_SEARCH_SPANS", "BENCH_SEARCH_QUERIES", "BENCH_SEARCH_FALLBACK_QUERIES", "BENCH_SEARCH_BACKENDS", "BENCH_SEARCH_PGLITE_DIR"], "test/bench/search.ts")}`
  )
})
