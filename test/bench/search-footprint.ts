/**
 * The search index's bytes on disk per span (not a test file: run it with `bun test/bench/search-footprint.ts`).
 *
 * The workload of the storage issue: BENCH_RUNS runs of a BENCH_STEPS-step tool-using chat agent (a ~2 KB system
 * prompt, 8 tool schemas, the history growing by each answer and a ~1.5 KB tool result; every model call carries
 * the whole history), one POST /api/v1/traces per run (a root span, then a model call and a tool call per step).
 * The service indexes them in the background; once `GET /api/v1/diagnostics` shows every span indexed and no search
 * job pending, the server stops, the database is VACUUMed and the sizes of span_embeddings (heap, TOAST) and of each
 * of its indexes are divided by the spans.
 *
 * Sides: "after" runs this checkout; "before" runs the checkout at BENCH_BEFORE_DIR (a detached worktree of main
 * whose node_modules links to this one's), when set (BENCH_AFTER_DIR replaces this checkout on the "after" side). Backends (BENCH_BACKENDS, default "postgres,pglite"):
 * PostgreSQL at BENCH_DATABASE_URL (a fresh database per side) and embedded PGlite (a fresh data directory per side,
 * measured by opening it here after the server stopped). Also prints the seconds from the last POST until the index
 * was complete and the server's CPU seconds over the whole run (ingest and indexing).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import { btree_gin } from "@electric-sql/pglite/contrib/btree_gin"
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm"
import pg from "pg"
import {
  freePort,
  freshDatabase,
  KEY,
  log,
  numberEnv,
  onCleanup,
  processCpuSeconds,
  ROOT,
  runBench,
  sleep,
  tableLines
} from "./Harness.ts"
import { restBody, STEPS } from "./AgentRun.ts"

const RUNS = numberEnv("BENCH_RUNS", 100)
const BEFORE_DIR = process.env.BENCH_BEFORE_DIR
const BACKENDS = (process.env.BENCH_BACKENDS ?? "postgres,pglite").split(",").map((s) => s.trim())

// ---------------------------------------------------------------------------------------------- one side

const SIZES = `
  SELECT 'heap' AS part, pg_relation_size('span_embeddings'::regclass) AS bytes
  UNION ALL
  SELECT 'toast', COALESCE((SELECT pg_total_relation_size(reltoastrelid) FROM pg_class
                            WHERE oid = 'span_embeddings'::regclass AND reltoastrelid <> 0), 0)
  UNION ALL
  SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)
  FROM pg_index i WHERE i.indrelid = 'span_embeddings'::regclass`

interface Result {
  readonly spans: number
  readonly sizes: Map<string, number>
  readonly indexSeconds: number
  readonly cpuSeconds: number
}

/** Runs the service of checkout `dir` on the backend, sends the workload, waits for the index, measures. */
const runSide = async (dir: string, backend: string): Promise<Result> => {
  const port = freePort()
  let databaseUrl: string | undefined
  let dataDir: string | undefined
  if (backend === "postgres") {
    databaseUrl = (await freshDatabase("tapedeck_sfoot_")).databaseUrl
  } else {
    dataDir = mkdtempSync(join(tmpdir(), "tapedeck-sfoot-"))
    const d = dataDir
    onCleanup(async () => rmSync(d, { recursive: true, force: true }))
  }
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith("TAPEDECK_") && !k.startsWith("BENCH_") && k !== "DATABASE_URL"
    )
  )
  const proc = Bun.spawn({
    cmd: [process.execPath, "src/app/main.ts"],
    cwd: dir,
    env: {
      ...inherited,
      ...(databaseUrl === undefined ? { TAPEDECK_DATA_DIR: dataDir! } : { DATABASE_URL: databaseUrl }),
      PORT: String(port),
      HOST: "127.0.0.1",
      TAPEDECK_API_KEYS: `bench=${KEY}`,
      TAPEDECK_RATE_LIMIT_PER_MINUTE: "100000000",
      TAPEDECK_LOG_LEVEL: "warn",
      MIMALLOC_PURGE_DELAY: "-1"
    },
    stdin: "ignore",
    stdout: "ignore",
    stderr: "inherit"
  })
  onCleanup(async () => {
    if (proc.exitCode === null) proc.kill("SIGKILL")
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`server in ${dir} exited (${proc.exitCode})`)
    const ok = await fetch(`${url}/health`).then(
      (r) => r.status === 200,
      () => false
    )
    if (ok) break
    if (i > 600) throw new Error("server did not start")
    await sleep(100)
  }
  if (databaseUrl !== undefined && process.env.BENCH_AFTER_SQL && dir === ROOT) {
    // A variant to compare (PostgreSQL only), run once the service has migrated its database.
    const db = new pg.Client({ connectionString: databaseUrl })
    await db.connect()
    await db.query(process.env.BENCH_AFTER_SQL).finally(() => db.end())
  }
  const headers = { "x-service-key": KEY, "content-type": "application/json" }
  let spans = 0
  for (let run = 0; run < RUNS; run++) {
    const body = restBody(run)
    spans += body.spans.length
    const res = await fetch(`${url}/api/v1/traces`, { method: "POST", headers, body: JSON.stringify(body) })
    if (res.status !== 200 && res.status !== 201)
      throw new Error(`POST /api/v1/traces: ${res.status} ${await res.text()}`)
  }
  const posted = performance.now()
  for (;;) {
    const res = await fetch(`${url}/api/v1/diagnostics`, { headers })
    const d = (await res.json()) as { search: { pending_jobs: number; indexed_spans: number; stale_spans: number } }
    if (d.search.pending_jobs === 0 && d.search.stale_spans === 0 && d.search.indexed_spans >= spans) break
    if (performance.now() - posted > 900_000) throw new Error(`index incomplete: ${JSON.stringify(d.search)}`)
    await sleep(200)
  }
  const indexSeconds = (performance.now() - posted) / 1000
  const cpuSeconds = processCpuSeconds(proc.pid)
  proc.kill("SIGTERM")
  await proc.exited

  let rows: Array<{ part: string; bytes: string | number }>
  if (databaseUrl !== undefined) {
    const db = new pg.Client({ connectionString: databaseUrl })
    await db.connect()
    try {
      await db.query("VACUUM")
      if (process.env.BENCH_REINDEX === "1") await db.query("REINDEX TABLE span_embeddings")
      rows = (await db.query(SIZES)).rows
      if (process.env.BENCH_DEBUG === "1") {
        const d =
          await db.query(`SELECT s.span_type, count(*)::int AS n, avg(pg_column_size(e.lexemes))::int AS lexeme_bytes,
            avg(cardinality(e.lexemes))::int AS lexemes, avg(pg_column_size(e.embedding))::int AS emb
          FROM span_embeddings e JOIN spans s ON s.trace_id = e.trace_id AND s.id = e.span_id GROUP BY 1`)
        console.log(d.rows)
      }
    } finally {
      await db.end()
    }
  } else {
    const db = await PGlite.create({ dataDir: dataDir!, extensions: { vector, btree_gin, pg_trgm } })
    try {
      await db.exec("VACUUM")
      rows = (await db.query<{ part: string; bytes: string | number }>(SIZES)).rows
    } finally {
      await db.close()
    }
  }
  return { spans, sizes: new Map(rows.map((r) => [r.part, Number(r.bytes)])), indexSeconds, cpuSeconds }
}

// ---------------------------------------------------------------------------------------------- report

await runBench(async () => {
  const sides: Array<readonly [string, string]> = [["after", resolve(process.env.BENCH_AFTER_DIR ?? ROOT)]]
  if (BEFORE_DIR !== undefined) sides.unshift(["before", resolve(BEFORE_DIR)])
  for (const backend of BACKENDS) {
    const results: Array<readonly [string, Result]> = []
    for (const [name, dir] of sides) {
      log(`${backend} ${name}: ${RUNS} runs of ${STEPS} steps (${dir})`)
      results.push([name, await runSide(dir, backend)])
    }
    const parts = [...new Set(results.flatMap(([, r]) => [...r.sizes.keys()]))]
    const per = (r: Result, part: string) => (r.sizes.get(part) ?? 0) / r.spans
    const total = (r: Result) => [...r.sizes.values()].reduce((a, b) => a + b, 0) / r.spans
    const lines = tableLines(
      [`${backend}: bytes per span`, ...results.map(([n]) => n)],
      [
        ...parts.map((part) => [part, ...results.map(([, r]) => (per(r, part) === 0 ? "–" : per(r, part).toFixed(0)))]),
        ["**total**", ...results.map(([, r]) => `**${total(r).toFixed(0)}**`)],
        ["spans", ...results.map(([, r]) => String(r.spans))],
        ["index complete after last POST (s)", ...results.map(([, r]) => r.indexSeconds.toFixed(1))],
        ["server CPU, whole run (s)", ...results.map(([, r]) => r.cpuSeconds.toFixed(1))]
      ]
    )
    console.log(`\n${lines.join("\n")}\n`)
  }
})
