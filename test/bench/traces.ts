/**
 * Traces API benchmark against a real PostgreSQL (not a test file: run it with `bun test/bench/traces.ts`).
 *
 * 1. Creates a fresh database on BENCH_DATABASE_URL's server and starts the service (`bun src/app/main.ts`) on it
 *    as a separate process, so this client never shares the server's event loop.
 * 2. Ingest: POST /api/v1/traces, each with BENCH_SPANS spans of ~1 KB JSON, BENCH_CONCURRENCY requests in
 *    flight, for BENCH_SECONDS (after a warm-up). Reports traces/s, spans/s and request latency.
 * 3. Ceiling, before the ingest, once the warm-up's jobs have run (the quiet service): bare PostgreSQL
 *    `COPY ... FROM STDIN` of spans of the same shape and payload sizes into `spans_copy (LIKE spans INCLUDING ALL)`
 *    (same columns, primary key and index, no foreign key) over BENCH_CONCURRENCY connections, one COPY of
 *    BENCH_SPANS rows per trace, BENCH_CEILING_TRACES of them.
 * 3b. SQL ceiling: the server's own span statement (`INSERT … SELECT … FROM json_to_recordset`) of the same rows
 *    into `spans_insert (LIKE spans INCLUDING ALL)`, one statement of BENCH_SPANS rows per trace, same connections.
 * 3c. Server ceiling: a bare Bun.serve in its own process (BARE_SERVER: JSON.parse and that statement, into
 *    `spans_bare`), driven like step 2 for BENCH_SECONDS after the warm-up.
 * 4. Detail, first of all (on the quiet service), once the trace's own jobs have run (up to BENCH_JOB_DRAIN_SECONDS):
 *    GET /api/v1/traces/{id} of a BENCH_DETAIL_SPANS-span trace, BENCH_DETAIL_REQUESTS sequential requests, beside
 *    a bare `SELECT * FROM spans WHERE trace_id = $1` of the same rows. (Then the warm-up, step 3, and step 2.)
 * 5. Prints a markdown table; drops the database and stops the server (also on error or Ctrl-C).
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_CONCURRENCY, BENCH_SPANS,
 * BENCH_DETAIL_SPANS, BENCH_DETAIL_REQUESTS, BENCH_JOB_DRAIN_SECONDS, BENCH_ANALYZE (default on: ANALYZE after the warm-up), BENCH_CPU_PROF (a directory: the server runs under
 * `bun --cpu-prof --cpu-prof-md` and writes its profile there on exit). TAPEDECK_JOB_POLL_MS=3600000 with
 * BENCH_JOB_DRAIN_SECONDS=1 leaves the job worker idle: ingestion alone.
 */
import { availableParallelism } from "node:os"
import pg from "pg"
import { SPAN_WRITE_COLUMNS, SPAN_RECORD_COLUMNS, SPAN_RECORD_VALUES, toRecordsJson } from "#layers/traces/SpanRecords"
import { copyText } from "#layers/storage/PgCopy"
import { copyCeiling } from "./Copy.ts"
import {
  ANALYZE_AFTER_WARMUP,
  analyzeNote,
  commandLine,
  connect,
  connectMany,
  type CoresBusy,
  cpuMeter,
  drainJobs,
  filler,
  fmtCores,
  fmtInt,
  fmtMs,
  fmtRatio,
  freshDatabase,
  KEY,
  latencyStats,
  log,
  mark,
  numberEnv,
  runBench,
  startBareServer,
  startServer,
  SYSTEM_PROMPT,
  tableLines
} from "./Harness.ts"

// ---------------------------------------------------------------------------------------------- settings

const SECONDS = numberEnv("BENCH_SECONDS", 20)
const WARMUP_SECONDS = numberEnv("BENCH_WARMUP_SECONDS", 3)
const CONCURRENCY = Math.floor(numberEnv("BENCH_CONCURRENCY", 8))
const SPANS = Math.floor(numberEnv("BENCH_SPANS", 100))
const DETAIL_SPANS = Math.floor(numberEnv("BENCH_DETAIL_SPANS", 1000))
const DETAIL_REQUESTS = Math.floor(numberEnv("BENCH_DETAIL_REQUESTS", 200))
const JOB_DRAIN_SECONDS = numberEnv("BENCH_JOB_DRAIN_SECONDS", 120)
/** Traces of BENCH_SPANS rows each that the COPY and INSERT ceilings write (about as many as the API takes in 20 s). */
const CEILING_TRACES = Math.floor(numberEnv("BENCH_CEILING_TRACES", 2500))

const TARGET_SPANS_PER_SECOND = 25_000
const TARGET_COPY_RATIO = 0.5
const TARGET_DETAIL_P50_MS = 15

const KNOBS = [
  "BENCH_DATABASE_URL",
  "BENCH_SECONDS",
  "BENCH_WARMUP_SECONDS",
  "BENCH_CONCURRENCY",
  "BENCH_SPANS",
  "BENCH_DETAIL_SPANS",
  "BENCH_DETAIL_REQUESTS",
  "BENCH_JOB_DRAIN_SECONDS",
  "BENCH_CEILING_TRACES",
  "BENCH_ANALYZE",
  "BENCH_CPU_PROF"
]
const COMMAND = commandLine(KNOBS, "test/bench/traces.ts")

/**
 * PostgreSQL CPU including what exited backends used: the ceilings' connections close before their phase's last
 * snapshot, and counted "live" their work showed up under "anything else".
 */
const CPU = cpuMeter("reaped")

// ---------------------------------------------------------------------------------------------- payloads

const PROMPTS = Array.from({ length: 64 }, () => filler(335))
const COMPLETIONS = Array.from({ length: 64 }, () => filler(280))
const SYSTEM = SYSTEM_PROMPT

interface BenchSpan {
  readonly id: string
  readonly parent_id: string | null
  readonly span_type: "llm_call" | "tool_call"
  readonly name: string
  readonly model?: string
  readonly input: Record<string, unknown>
  readonly output: Record<string, unknown>
  readonly input_tokens?: number
  readonly output_tokens?: number
  readonly cost?: number
  readonly started_at: string
  readonly ended_at: string
}

/** `count` spans of ~1 KB JSON each: the first is the root, every other one its child. */
const makeSpans = (count: number, startMs: number): Array<BenchSpan> => {
  const spans: Array<BenchSpan> = []
  let rootId = ""
  for (let i = 0; i < count; i++) {
    const id = crypto.randomUUID()
    if (i === 0) rootId = id
    const prompt = PROMPTS[(i * 7 + count) % PROMPTS.length]!
    const completion = COMPLETIONS[(i * 11 + count) % COMPLETIONS.length]!
    const started = startMs + i * 20
    const common = {
      id,
      parent_id: i === 0 ? null : rootId,
      started_at: new Date(started).toISOString(),
      ended_at: new Date(started + 15).toISOString()
    }
    spans.push(
      i % 2 === 0
        ? {
            ...common,
            span_type: "llm_call",
            name: `llm.chat #${i}`,
            model: "gpt-4o-mini-2024-07-18",
            input: {
              messages: [
                { role: "system", content: SYSTEM },
                { role: "user", content: prompt }
              ]
            },
            output: { role: "assistant", content: completion },
            input_tokens: 120 + (i % 50),
            output_tokens: 80 + (i % 30),
            cost: 0.000125 * (1 + (i % 7))
          }
        : {
            ...common,
            span_type: "tool_call",
            name: `tool.search #${i}`,
            input: { tool: "web_search", arguments: { query: prompt.slice(0, 200), top_k: 5, filter: SYSTEM } },
            output: { results: [{ title: "result", snippet: completion }] }
          }
    )
  }
  return spans
}

let clock = Date.UTC(2026, 0, 1)
/** A fresh trace (new ids, advancing start times) as its POST body. */
const makeTraceBody = (spanCount: number) => {
  const startMs = (clock += 60_000)
  return JSON.stringify({
    id: crypto.randomUUID(),
    started_at: new Date(startMs).toISOString(),
    name: "bench agent run",
    status: "completed",
    spans: makeSpans(spanCount, startMs)
  })
}

// ---------------------------------------------------------------------------------------------- COPY

const COPY_COLUMNS = [
  "trace_id",
  "account_id",
  "id",
  "parent_id",
  "span_type",
  "name",
  "model",
  "input",
  "output",
  "input_tokens",
  "output_tokens",
  "cost",
  "started_at",
  "ended_at"
] as const

/** One trace's spans as COPY text rows, the same values the API stores for them. */
const copyRows = (accountId: string, spanCount: number) => {
  const traceId = crypto.randomUUID()
  const startMs = (clock += 60_000)
  let out = ""
  for (const s of makeSpans(spanCount, startMs)) {
    out +=
      [
        traceId,
        accountId,
        s.id,
        s.parent_id,
        s.span_type,
        s.name,
        s.model,
        s.input,
        s.output,
        s.input_tokens,
        s.output_tokens,
        s.cost,
        s.started_at,
        s.ended_at
      ]
        .map(copyText)
        .join("\t") + "\n"
  }
  return out
}

// ---------------------------------------------------------------------------------------------- phases

/** Microseconds of CPU per span, from cores busy at a rate of spans/s: "server / postgres / client". */
const perSpan = (cpu: CoresBusy, spansPerSecond: number) =>
  [cpu.server, cpu.postgres, cpu.client].map((cores) => ((cores / spansPerSecond) * 1e6).toFixed(0)).join(" / ")

interface Throughput {
  readonly traces: number
  readonly seconds: number
  readonly latencies: Array<number>
  readonly errors: number
  readonly firstError?: string
  readonly bodyBytes: number
}

/** `concurrency` workers POSTing fresh traces until `seconds` have passed. */
const ingest = async (url: string, seconds: number, concurrency: number, spanCount: number): Promise<Throughput> => {
  const latencies: Array<number> = []
  let traces = 0
  let errors = 0
  let firstError: string | undefined
  let bodyBytes = 0
  const start = performance.now()
  const end = start + seconds * 1000
  const worker = async () => {
    while (performance.now() < end) {
      const body = makeTraceBody(spanCount)
      const t0 = performance.now()
      let ok = false
      try {
        const res = await fetch(`${url}/api/v1/traces`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-service-key": KEY },
          body
        })
        const text = await res.text()
        ok = res.status === 200
        if (!ok) firstError ??= `HTTP ${res.status}: ${text.slice(0, 500)}`
      } catch (e) {
        firstError ??= String(e)
      }
      const t1 = performance.now()
      if (ok) {
        traces++
        bodyBytes += body.length
        latencies.push(t1 - t0)
      } else {
        errors++
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  const elapsed = (performance.now() - start) / 1000
  return { traces, seconds: elapsed, latencies, errors, bodyBytes, ...(firstError ? { firstError } : {}) }
}

/** `batches` COPYs of `spanCount` rows over `concurrency` connections. */
const copyCeilingOf = (
  databaseUrl: string,
  serverPid: number,
  accountId: string,
  batches: number,
  concurrency: number,
  spanCount: number
) =>
  copyCeiling({
    databaseUrl,
    serverPid,
    cpu: CPU,
    text: `COPY spans_copy (${COPY_COLUMNS.join(", ")}) FROM STDIN`,
    batches,
    concurrency,
    batch: () => copyRows(accountId, spanCount)
  })

/**
 * The SQL ceiling: the server's own span INSERT (`INSERT … SELECT … FROM json_to_recordset`, SpanRecords.ts) of
 * the same rows, `batches` statements of `spanCount` spans over `concurrency` connections, straight from pg.
 */
const insertCeiling = async (
  databaseUrl: string,
  serverPid: number,
  accountId: string,
  batches: number,
  concurrency: number,
  spanCount: number
) => {
  const clients = await connectMany(databaseUrl, concurrency)
  const text = `INSERT INTO spans_insert (trace_id, account_id, ${SPAN_WRITE_COLUMNS})
    SELECT $1::uuid, $2::uuid, ${SPAN_RECORD_VALUES} FROM json_to_recordset($3::json) AS x(${SPAN_RECORD_COLUMNS})`
  const run = (client: pg.Client) =>
    client.query(text, [
      crypto.randomUUID(),
      accountId,
      toRecordsJson(makeSpans(spanCount, (clock += 60_000)) as never)
    ])
  try {
    await Promise.all(clients.map(run))
    let next = 0
    let rows = 0
    const cpu0 = CPU.snapshot(serverPid)
    const start = performance.now()
    await Promise.all(
      clients.map(async (client) => {
        while (next < batches) {
          next++
          const result = await run(client)
          rows += result.rowCount ?? 0
        }
      })
    )
    const seconds = (performance.now() - start) / 1000
    return { rows, seconds, cpu: CPU.busy(cpu0, CPU.snapshot(serverPid)) }
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})))
  }
}

/**
 * The bare-server ceiling: a Bun.serve in its own process doing only what no server can skip (read the POST,
 * JSON.parse it, run the server's span statement from SpanRecords.ts through pg, answer), into spans_bare. No
 * validation, authentication, trace row, jobs or Effect: the API's gap to it is what those cost.
 */
const BARE_SERVER = `
const pg = require("pg")
const { SPAN_WRITE_COLUMNS, SPAN_RECORD_COLUMNS, SPAN_RECORD_VALUES, toRecordsJson } = await import("#layers/traces/SpanRecords")
const pool = new pg.Pool({ connectionString: process.env.BARE_DATABASE_URL, max: Number(process.env.BARE_POOL) })
pool.on("error", () => {})
const text = \`INSERT INTO spans_bare (trace_id, account_id, \${SPAN_WRITE_COLUMNS})
  SELECT $1::uuid, $2::uuid, \${SPAN_RECORD_VALUES} FROM json_to_recordset($3::json) AS x(\${SPAN_RECORD_COLUMNS})\`
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const body = await req.json()
    await pool.query(text, [body.id, process.env.BARE_ACCOUNT_ID, toRecordsJson(body.spans)])
    return Response.json({ id: body.id })
  }
})
console.log("PORT " + server.port)
`

/** The API's ingest phase, against the bare server instead: the same client, bodies, concurrency and duration. */
const bareServerCeiling = async (databaseUrl: string, accountId: string) => {
  const bare = await startBareServer(BARE_SERVER, {
    BARE_DATABASE_URL: databaseUrl,
    BARE_ACCOUNT_ID: accountId,
    BARE_POOL: String(CONCURRENCY)
  })
  try {
    await ingest(bare.url, WARMUP_SECONDS, CONCURRENCY, SPANS)
    const cpu0 = CPU.snapshot(bare.pid)
    const run = await ingest(bare.url, SECONDS, CONCURRENCY, SPANS)
    const cpu = CPU.busy(cpu0, CPU.snapshot(bare.pid))
    if (run.errors > 0) throw new Error(`the bare server failed: ${run.firstError}`)
    return { ...run, cpu }
  } finally {
    await bare.stop()
  }
}

const detail = async (
  url: string,
  databaseUrl: string,
  db: pg.Client,
  serverPid: number,
  spanCount: number,
  requests: number
) => {
  const body = makeTraceBody(spanCount)
  const traceId = (JSON.parse(body) as { id: string }).id
  const created = await fetch(`${url}/api/v1/traces`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-key": KEY },
    body
  })
  if (created.status !== 200)
    throw new Error(`creating the ${spanCount}-span trace: HTTP ${created.status} ${await created.text()}`)
  await created.arrayBuffer()
  // Steady state: the trace's own search-index and terminal jobs run first.
  const drain = await drainJobs(db, JOB_DRAIN_SECONDS)

  const get = () => fetch(`${url}/api/v1/traces/${traceId}`, { headers: { "x-service-key": KEY } })
  const check = await get()
  const checkText = await check.text()
  if (check.status !== 200) throw new Error(`GET detail: HTTP ${check.status} ${checkText.slice(0, 500)}`)
  const returned = (JSON.parse(checkText) as { spans: Array<unknown> }).spans.length
  if (returned !== spanCount) throw new Error(`GET detail returned ${returned} spans, expected ${spanCount}`)
  const responseBytes = Buffer.byteLength(checkText)

  const warmup = Math.min(20, requests)
  for (let i = 0; i < warmup; i++) await (await get()).arrayBuffer()
  const latencies: Array<number> = []
  const cpu0 = CPU.snapshot(serverPid)
  for (let i = 0; i < requests; i++) {
    const t0 = performance.now()
    const res = await get()
    await res.arrayBuffer()
    if (res.status !== 200) throw new Error(`GET detail: HTTP ${res.status}`)
    latencies.push(performance.now() - t0)
  }
  const cpu = CPU.busy(cpu0, CPU.snapshot(serverPid))

  // Ceiling: the same rows straight from PostgreSQL (all columns, parsed by pg as the server's driver does).
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  const selectLatencies: Array<number> = []
  try {
    for (let i = 0; i < warmup; i++) await client.query("SELECT * FROM spans WHERE trace_id = $1", [traceId])
    for (let i = 0; i < requests; i++) {
      const t0 = performance.now()
      const result = await client.query("SELECT * FROM spans WHERE trace_id = $1", [traceId])
      selectLatencies.push(performance.now() - t0)
      if (result.rowCount !== spanCount) throw new Error(`SELECT returned ${result.rowCount} rows`)
    }
  } finally {
    await client.end()
  }
  return { latencies, selectLatencies, responseBytes, cpu, drain }
}

// ---------------------------------------------------------------------------------------------- main

const main = async () => {
  const { database, databaseUrl, pgVersion, autovacuum } = await freshDatabase()

  log(`database ${database}; starting the server`)
  const server = await startServer(databaseUrl)
  const db = await connect(databaseUrl)

  const sampleSpans = makeSpans(SPANS, clock)
  const spanBytes = sampleSpans.reduce((n, s) => n + JSON.stringify(s).length, 0) / sampleSpans.length

  // The detail is read first, on the quiet service: after the ingest below, indexing its 270k spans for search
  // keeps the server's event loop busy for minutes, and the read would measure that instead.
  log(`detail: GET /api/v1/traces/{id} of a ${DETAIL_SPANS}-span trace, ${DETAIL_REQUESTS} sequential requests`)
  const read = await detail(server.url, databaseUrl, db, server.pid, DETAIL_SPANS, DETAIL_REQUESTS)
  const getLatency = latencyStats(read.latencies)
  const selectLatency = latencyStats(read.selectLatencies)

  log(`warm-up: ${WARMUP_SECONDS} s of POST /api/v1/traces at concurrency ${CONCURRENCY}`)
  const warm = await ingest(server.url, WARMUP_SECONDS, CONCURRENCY, SPANS)
  if (warm.errors > 0) throw new Error(`warm-up failed: ${warm.firstError}\nserver output:\n${server.output()}`)

  // The ceilings run on the quiet service (the warm-up's search indexing done), as the detail did: the server's
  // background work would otherwise share the machine with them and lower the ceiling by a varying amount.
  const warmJobs = await drainJobs(db, JOB_DRAIN_SECONDS)
  if (ANALYZE_AFTER_WARMUP) await db.query("ANALYZE")
  const accountId = (await db.query<{ account_id: string }>("SELECT account_id FROM traces LIMIT 1")).rows[0]
    ?.account_id
  if (!accountId) throw new Error("no trace was stored")
  await db.query("CREATE TABLE spans_copy (LIKE spans INCLUDING ALL)")
  await db.query("CHECKPOINT")
  log(`ceiling: ${CEILING_TRACES} COPYs of ${SPANS} rows into spans_copy over ${CONCURRENCY} connections`)
  const copy = await copyCeilingOf(databaseUrl, server.pid, accountId, CEILING_TRACES, CONCURRENCY, SPANS)
  const copySpansPerSecond = copy.rows / copy.seconds
  const copyBatchesPerSecond = copy.batches / copy.seconds
  const copyLatency = latencyStats(copy.latencies)
  await db.query("CREATE TABLE spans_insert (LIKE spans INCLUDING ALL)")
  await db.query("CHECKPOINT")
  log(
    `ceiling: ${CEILING_TRACES} INSERT … json_to_recordset statements of ${SPANS} rows into spans_insert over ${CONCURRENCY} connections`
  )
  const insert = await insertCeiling(databaseUrl, server.pid, accountId, CEILING_TRACES, CONCURRENCY, SPANS)
  const insertSpansPerSecond = insert.rows / insert.seconds
  await db.query("CREATE TABLE spans_bare (LIKE spans INCLUDING ALL)")
  await db.query("CHECKPOINT")
  log(`ceiling: a bare Bun.serve (JSON.parse and the span statement) under the ingest's load, ${SECONDS} s`)
  const bare = await bareServerCeiling(databaseUrl, accountId)
  const bareSpansPerSecond = (bare.traces / bare.seconds) * SPANS
  const bareLatency = latencyStats(bare.latencies)

  await db.query("CHECKPOINT")
  log(
    `ingest: ${SECONDS} s of POST /api/v1/traces (${SPANS} spans, ~${Math.round(spanBytes)} B each) at concurrency ${CONCURRENCY}`
  )
  const ingestCpu0 = CPU.snapshot(server.pid)
  const api = await ingest(server.url, SECONDS, CONCURRENCY, SPANS)
  const ingestCpu = CPU.busy(ingestCpu0, CPU.snapshot(server.pid))
  if (api.errors > 0)
    throw new Error(`${api.errors} POSTs failed: ${api.firstError}\nserver output:\n${server.output()}`)
  const apiTracesPerSecond = api.traces / api.seconds
  const apiSpansPerSecond = apiTracesPerSecond * SPANS
  const apiLatency = latencyStats(api.latencies)

  // Everything the API acknowledged is stored.
  const stored = (
    await db.query<{ traces: string; spans: string; api_row: string; copy_row: string }>(
      `SELECT (SELECT count(*) FROM traces) AS traces, (SELECT count(*) FROM spans) AS spans,
            (SELECT avg(pg_column_size(s.*))::int FROM (SELECT * FROM spans LIMIT 10000) s) AS api_row,
            (SELECT avg(pg_column_size(s.*))::int FROM (SELECT * FROM spans_copy LIMIT 10000) s) AS copy_row`
    )
  ).rows[0]!
  const expectedTraces = warm.traces + api.traces + 1
  const expectedSpans = (warm.traces + api.traces) * SPANS + DETAIL_SPANS
  if (Number(stored.traces) !== expectedTraces || Number(stored.spans) !== expectedSpans) {
    throw new Error(
      `stored ${stored.traces} traces / ${stored.spans} spans, expected ${expectedTraces} / ${expectedSpans}`
    )
  }

  const spansRatio = apiSpansPerSecond / copySpansPerSecond
  const rows: Array<[string, string, string, string, string]> = [
    [
      `POST /api/v1/traces throughput (${SPANS} spans × ~1 KB, concurrency ${CONCURRENCY})`,
      `${fmtInt(apiTracesPerSecond)} traces/s`,
      "—",
      `${fmtInt(copyBatchesPerSecond)} COPYs/s`,
      fmtRatio(apiTracesPerSecond / copyBatchesPerSecond)
    ],
    [
      "POST /api/v1/traces spans/s",
      `${fmtInt(apiSpansPerSecond)} spans/s`,
      `≥ ${fmtInt(TARGET_SPANS_PER_SECOND)} spans/s${mark(apiSpansPerSecond >= TARGET_SPANS_PER_SECOND)}`,
      `${fmtInt(copySpansPerSecond)} spans/s (COPY)`,
      fmtRatio(spansRatio)
    ],
    [
      "API ÷ COPY spans/s",
      fmtRatio(spansRatio),
      `≥ ${TARGET_COPY_RATIO}${mark(spansRatio >= TARGET_COPY_RATIO)}`,
      "—",
      fmtRatio(spansRatio)
    ],
    [
      "Bare INSERT … json_to_recordset (the server's span statement) spans/s",
      `${fmtInt(insertSpansPerSecond)} spans/s`,
      "—",
      `${fmtInt(copySpansPerSecond)} spans/s (COPY)`,
      fmtRatio(insertSpansPerSecond / copySpansPerSecond)
    ],
    [
      "Bare Bun.serve: JSON.parse + the span statement (no validation, auth, trace row, jobs) spans/s",
      `${fmtInt(bareSpansPerSecond)} spans/s`,
      "—",
      `${fmtInt(copySpansPerSecond)} spans/s (COPY)`,
      fmtRatio(bareSpansPerSecond / copySpansPerSecond)
    ],
    [
      "API ÷ bare Bun.serve spans/s",
      fmtRatio(apiSpansPerSecond / bareSpansPerSecond),
      "—",
      `${fmtInt(bareSpansPerSecond)} spans/s (bare server)`,
      fmtRatio(apiSpansPerSecond / bareSpansPerSecond)
    ],
    [
      "POST /api/v1/traces latency p50",
      fmtMs(apiLatency.p50),
      "—",
      `${fmtMs(copyLatency.p50)} (COPY)`,
      fmtRatio(copyLatency.p50 / apiLatency.p50)
    ],
    [
      "POST /api/v1/traces latency p99",
      fmtMs(apiLatency.p99),
      "—",
      `${fmtMs(copyLatency.p99)} (COPY)`,
      fmtRatio(copyLatency.p99 / apiLatency.p99)
    ],
    [
      `GET /api/v1/traces/{id} (${DETAIL_SPANS} spans) latency p50`,
      fmtMs(getLatency.p50),
      `≤ ${TARGET_DETAIL_P50_MS} ms${mark(getLatency.p50 <= TARGET_DETAIL_P50_MS)}`,
      `${fmtMs(selectLatency.p50)} (SELECT)`,
      fmtRatio(selectLatency.p50 / getLatency.p50)
    ],
    [
      `GET /api/v1/traces/{id} (${DETAIL_SPANS} spans) latency p99`,
      fmtMs(getLatency.p99),
      "—",
      `${fmtMs(selectLatency.p99)} (SELECT)`,
      fmtRatio(selectLatency.p99 / getLatency.p99)
    ]
  ]

  const lines = [
    ...tableLines(["metric", "value", "target", "ceiling", "ratio"], rows),
    "",
    `Command: \`${COMMAND}\``,
    "",
    `- Machine: ${availableParallelism()} CPUs, Bun ${Bun.version}, PostgreSQL ${pgVersion} (autovacuum ${autovacuum}; ${analyzeNote}); server \`bun src/app/main.ts\` in its own process on a fresh database.`,
    `- Ingest: ${fmtInt(api.traces)} traces (${fmtInt(api.traces * SPANS)} spans, ${(api.bodyBytes / api.traces / 1024).toFixed(1)} KiB bodies, spans ~${Math.round(spanBytes)} B of JSON) in ${api.seconds.toFixed(1)} s after a ${WARMUP_SECONDS} s warm-up; 0 errors; every acknowledged span verified stored.`,
    `- Ceiling, measured before the ingest on the quiet service (the warm-up's ${fmtInt(warmJobs.before)} jobs run, ${fmtInt(warmJobs.left)} left after ${warmJobs.seconds.toFixed(1)} s): spans of the same columns and payload sizes, by \`COPY spans_copy FROM STDIN\` (\`LIKE spans INCLUDING ALL\`: same primary key and index, no foreign key), one COPY of ${SPANS} rows per trace over ${CONCURRENCY} connections: ${fmtInt(copy.rows)} rows in ${copy.seconds.toFixed(1)} s. Average stored row: ${stored.api_row} B via the API, ${stored.copy_row} B via COPY.`,
    `- Detail, measured first on the quiet service (before the ingest, whose search indexing would otherwise share the server for minutes): ${DETAIL_REQUESTS} sequential GETs after 20 warm-up ones, ${(read.responseBytes / 1024).toFixed(0)} KiB responses, once the trace's own jobs had run (${fmtInt(read.drain.before)} pending, ${fmtInt(read.drain.left)} left after ${read.drain.seconds.toFixed(1)} s); ceiling \`SELECT * FROM spans WHERE trace_id = $1\` through pg.`,
    `- CPU, average cores busy of ${availableParallelism()} (server process / all postgres processes / this client / anything else): ` +
      (
        [
          ["ingest", ingestCpu],
          ["COPY", copy.cpu],
          ["INSERT", insert.cpu],
          ["bare server", bare.cpu],
          ["GET detail", read.cpu]
        ] as const
      )
        .map(([name, cpu]) => `${name} ${fmtCores(cpu)}`)
        .join("; ") +
      ".",
    `- CPU per span written (server / PostgreSQL / client, µs): API ${perSpan(ingestCpu, apiSpansPerSecond)}; bare INSERT ${perSpan(insert.cpu, insertSpansPerSecond)}; bare server ${perSpan(bare.cpu, bareSpansPerSecond)} (latency p50 / p99 ${fmtMs(bareLatency.p50)} / ${fmtMs(bareLatency.p99)}); COPY ${perSpan(copy.cpu, copySpansPerSecond)}.`,
    "- ratio: the fraction of the ceiling reached (throughput: value ÷ ceiling; latency: ceiling ÷ value)."
  ]
  console.log(lines.join("\n"))
}

await runBench(main)
