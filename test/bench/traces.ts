/**
 * Traces API benchmark against a real PostgreSQL (not a test file: run it with `bun test/bench/traces.ts`).
 *
 * 1. Creates a fresh database on BENCH_DATABASE_URL's server and starts the service (`bun src/main.ts`) on it
 *    as a separate process, so this client never shares the server's event loop.
 * 2. Ingest: POST /api/v1/traces, each with BENCH_SPANS spans of ~1 KB JSON, BENCH_CONCURRENCY requests in
 *    flight, for BENCH_SECONDS (after a warm-up). Reports traces/s, spans/s and request latency.
 * 3. Ceiling: bare PostgreSQL `COPY ... FROM STDIN` of as many spans of the same shape and payload sizes into
 *    `spans_copy (LIKE spans INCLUDING ALL)` (same columns, primary key and index, no foreign key) over
 *    BENCH_CONCURRENCY connections, one COPY of BENCH_SPANS rows per trace the API took.
 * 4. Detail: GET /api/v1/traces/{id} of a BENCH_DETAIL_SPANS-span trace, BENCH_DETAIL_REQUESTS sequential
 *    requests, beside a bare `SELECT * FROM spans WHERE trace_id = $1` of the same rows.
 * 5. Prints a markdown table; drops the database and stops the server (also on error or Ctrl-C).
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_CONCURRENCY, BENCH_SPANS,
 * BENCH_DETAIL_SPANS, BENCH_DETAIL_REQUESTS, BENCH_CPU_PROF (a directory: the server runs under
 * `bun --cpu-prof --cpu-prof-md` and writes its profile there on exit).
 */
import { readdirSync, readFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import { resolve } from "node:path"
import pg from "pg"

// ---------------------------------------------------------------------------------------------- settings

const env = process.env
const numberEnv = (name: string, fallback: number) => {
  const raw = env[name]
  if (raw === undefined || raw === "") return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got '${raw}'`)
  return n
}

const ADMIN_URL = env.BENCH_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test"
const SECONDS = numberEnv("BENCH_SECONDS", 20)
const WARMUP_SECONDS = numberEnv("BENCH_WARMUP_SECONDS", 3)
const CONCURRENCY = Math.floor(numberEnv("BENCH_CONCURRENCY", 8))
const SPANS = Math.floor(numberEnv("BENCH_SPANS", 100))
const DETAIL_SPANS = Math.floor(numberEnv("BENCH_DETAIL_SPANS", 1000))
const DETAIL_REQUESTS = Math.floor(numberEnv("BENCH_DETAIL_REQUESTS", 200))
const CPU_PROF = env.BENCH_CPU_PROF || undefined

const TARGET_SPANS_PER_SECOND = 25_000
const TARGET_COPY_RATIO = 0.5
const TARGET_DETAIL_P50_MS = 15

const ROOT = resolve(import.meta.dir, "../..")
const KEY = "svc_bench_key_0001"

const KNOBS = [
  "BENCH_DATABASE_URL", "BENCH_SECONDS", "BENCH_WARMUP_SECONDS", "BENCH_CONCURRENCY", "BENCH_SPANS",
  "BENCH_DETAIL_SPANS", "BENCH_DETAIL_REQUESTS", "BENCH_CPU_PROF"
]
/** A URL as printed: any password masked. */
const masked = (value: string) => {
  try {
    const url = new URL(value)
    if (url.password) url.password = "***"
    return url.toString()
  } catch {
    return value
  }
}
const COMMAND = [
  ...KNOBS.filter((k) => env[k]).map((k) => `${k}=${k === "BENCH_DATABASE_URL" ? masked(env[k]!) : env[k]}`),
  "bun test/bench/traces.ts"
].join(" ")

// ---------------------------------------------------------------------------------------------- helpers

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Whether `promise` settled within `ms`; the timer never outlives it, so it cannot hold the process open. */
const within = async (promise: Promise<unknown>, ms: number) => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timedOut = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))
  try {
    return await Promise.race([promise.then(() => true, () => true), timedOut])
  } finally {
    clearTimeout(timer)
  }
}

const percentile = (sorted: ReadonlyArray<number>, q: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!

const latencyStats = (samples: ReadonlyArray<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), n: sorted.length }
}

const fmtInt = (n: number) => Math.round(n).toLocaleString("en-US")
const fmtMs = (n: number) => `${n.toFixed(n < 10 ? 2 : 1)} ms`
const fmtRatio = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "n/a")

const withDatabase = (url: string, database: string) => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

// ---------------------------------------------------------------------------------------------- CPU accounting

/** Kernel clock ticks per second (for /proc/<pid>/stat); 100 on practically every Linux. */
const CLOCK_TICKS = (() => {
  try {
    const out = Bun.spawnSync({ cmd: ["getconf", "CLK_TCK"] }).stdout.toString().trim()
    return Number(out) > 0 ? Number(out) : 100
  } catch {
    return 100
  }
})()

/** User + system CPU seconds of a process from /proc (Linux); 0 when unreadable. */
const processCpuSeconds = (pid: number | string) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return 0
  }
}

/** CPU seconds of every `postgres` process on this machine (backends, WAL writer, checkpointer, ...). */
const postgresCpuSeconds = () => {
  let total = 0
  try {
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      try {
        if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === "postgres") total += processCpuSeconds(entry)
      } catch {
        // exited meanwhile
      }
    }
  } catch {
    // no /proc
  }
  return total
}

/** CPU seconds the whole machine spent busy (not idle or waiting for I/O), from /proc/stat. */
const machineBusySeconds = () => {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0]!
    const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number)
    const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0)
    return (ticks.reduce((a, b) => a + b, 0) - idle) / CLOCK_TICKS
  } catch {
    return 0
  }
}

interface CpuSnapshot {
  readonly at: number
  readonly machine: number
  readonly server: number
  readonly postgres: number
  readonly client: number
}
const cpuSnapshot = (serverPid: number): CpuSnapshot => {
  const usage = process.cpuUsage()
  return {
    at: performance.now(),
    machine: machineBusySeconds(),
    server: processCpuSeconds(serverPid),
    postgres: postgresCpuSeconds(),
    client: (usage.user + usage.system) / 1e6
  }
}
/** Average cores busy between two snapshots. */
const coresBusy = (a: CpuSnapshot, b: CpuSnapshot) => {
  const seconds = (b.at - a.at) / 1000
  const f = (x: number) => Math.max(0, x / seconds).toFixed(2)
  const server = b.server - a.server
  const postgres = b.postgres - a.postgres
  const client = b.client - a.client
  const other = b.machine - a.machine - server - postgres - client
  return { server: f(server), postgres: f(postgres), client: f(client), other: f(other) }
}

// ---------------------------------------------------------------------------------------------- payloads

/** Deterministic filler text: plain words, so JSON needs no escapes and sizes stay predictable. */
const WORDS = (
  "agent tool call model prompt token result search query document answer context memory plan step " +
  "retrieve summarize evaluate reason observe action latency budget cache vector policy guard trace span"
).split(" ")
let seed = 42
const rand = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}
const filler = (chars: number) => {
  let s = ""
  while (s.length < chars) s += (s ? " " : "") + WORDS[Math.floor(rand() * WORDS.length)]
  return s.slice(0, chars)
}
const PROMPTS = Array.from({ length: 64 }, () => filler(335))
const COMPLETIONS = Array.from({ length: 64 }, () => filler(280))
const SYSTEM = "You are a careful research agent. Use the tools when they help and cite what you used."

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
          input: { messages: [{ role: "system", content: SYSTEM }, { role: "user", content: prompt }] },
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

/** COPY's text format: backslash, tab, newline and carriage return are escaped; NULL is \N. */
const copyText = (value: unknown): string => {
  if (value === null || value === undefined) return "\\N"
  const s = typeof value === "string" ? value : typeof value === "object" ? JSON.stringify(value) : String(value)
  return /[\\\t\n\r]/.test(s)
    ? s.replace(/\\/g, "\\\\").replace(/\t/g, "\\t").replace(/\n/g, "\\n").replace(/\r/g, "\\r")
    : s
}

const COPY_COLUMNS = [
  "trace_id", "account_id", "id", "parent_id", "span_type", "name", "model", "input", "output",
  "input_tokens", "output_tokens", "cost", "started_at", "ended_at"
] as const

/** One trace's spans as COPY text rows, the same values the API stores for them. */
const copyRows = (accountId: string, spanCount: number) => {
  const traceId = crypto.randomUUID()
  const startMs = (clock += 60_000)
  let out = ""
  for (const s of makeSpans(spanCount, startMs)) {
    out += [
      traceId, accountId, s.id, s.parent_id, s.span_type, s.name, s.model, s.input, s.output,
      s.input_tokens, s.output_tokens, s.cost, s.started_at, s.ended_at
    ].map(copyText).join("\t") + "\n"
  }
  return out
}

/** The part of pg's (untyped) Connection that a COPY FROM uses. */
interface PgConnection {
  query(text: string): void
  sendCopyFromChunk(chunk: Buffer): void
  endCopyFrom(): void
}

/**
 * A `COPY ... FROM STDIN` for pg's Client (its "submittable" protocol, as pg-copy-streams uses): the whole
 * payload goes out in one CopyData message once the server asks for it.
 */
class CopyFrom {
  callback: ((err: Error | null, rows?: number) => void) | undefined
  private rows = 0
  private done = false
  constructor(private readonly text: string, private readonly data: Buffer) {}
  static run(client: pg.Client, text: string, data: string) {
    return new Promise<number>((ok, fail) => {
      const copy = new CopyFrom(text, Buffer.from(data))
      copy.callback = (err, rows) => (err ? fail(err) : ok(rows ?? 0))
      client.query(copy as unknown as pg.QueryConfig)
    })
  }
  submit(connection: PgConnection) {
    connection.query(this.text)
  }
  handleCopyInResponse(connection: PgConnection) {
    connection.sendCopyFromChunk(this.data)
    connection.endCopyFrom()
  }
  handleCommandComplete(msg: { text?: string }) {
    this.rows = Number(msg.text?.split(" ").at(-1) ?? 0)
  }
  private finish(err: Error | null) {
    if (this.done) return
    this.done = true
    this.callback?.(err, this.rows)
  }
  // An error (from the server, or the connection lost) settles at once, as pg-copy-streams does.
  handleError(err: Error) {
    this.finish(err)
  }
  handleReadyForQuery() {
    this.finish(null)
  }
  // Not expected for COPY FROM; present so an unexpected message cannot crash the client.
  handleRowDescription() {}
  handleDataRow() {}
  handleEmptyQuery() {}
  handlePortalSuspended() {}
  handleCopyData() {}
}

// ---------------------------------------------------------------------------------------------- server

interface Server {
  readonly url: string
  readonly pid: number
  readonly output: () => string
  readonly stop: () => Promise<void>
}

const freePort = () => {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

const startServer = async (databaseUrl: string): Promise<Server> => {
  const port = freePort()
  const inherited = Object.fromEntries(
    Object.entries(env).filter(([k]) => !k.startsWith("TAPEDECK_") && !k.startsWith("BENCH_") && k !== "DATABASE_URL")
  )
  const profile = CPU_PROF ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${resolve(CPU_PROF)}`] : []
  const proc = Bun.spawn({
    cmd: [process.execPath, ...profile, "src/main.ts"],
    cwd: ROOT,
    env: {
      ...inherited,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      HOST: "127.0.0.1",
      TAPEDECK_API_KEYS: `bench=${KEY}`,
      TAPEDECK_RATE_LIMIT_PER_MINUTE: "100000000",
      TAPEDECK_LOG_LEVEL: "Warn" // Effect reads the label (WARN), case-insensitively; "Warning" is refused
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe"
  })
  // Drain the server's output (a full pipe would stall it); keep the tail for error reports.
  let tail = ""
  const drain = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder()
    for await (const chunk of stream) tail = (tail + decoder.decode(chunk, { stream: true })).slice(-20_000)
  }
  const drained = Promise.all([drain(proc.stdout), drain(proc.stderr)]).catch(() => {})
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGTERM")
      if (!(await within(proc.exited, 15_000))) {
        proc.kill("SIGKILL")
        await proc.exited
      }
    }
    await within(drained, 1000)
  }
  const deadline = Date.now() + 60_000
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      await within(drained, 1000)
      throw new Error(`server exited (${proc.exitCode ?? proc.signalCode}) before answering /health:\n${tail}`)
    }
    try {
      const res = await fetch(`${url}/health`)
      await res.arrayBuffer()
      if (res.status === 200) break
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`server did not answer /health with 200 within 60 s:\n${tail}`)
    }
    await sleep(100)
  }
  return { url, pid: proc.pid, output: () => tail, stop }
}

// ---------------------------------------------------------------------------------------------- phases

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
const copyCeiling = async (
  databaseUrl: string,
  serverPid: number,
  accountId: string,
  batches: number,
  concurrency: number,
  spanCount: number
) => {
  const clients = await Promise.all(Array.from({ length: concurrency }, async () => {
    const client = new pg.Client({ connectionString: databaseUrl })
    await client.connect()
    return client
  }))
  const text = `COPY spans_copy (${COPY_COLUMNS.join(", ")}) FROM STDIN`
  try {
    // Warm-up on every connection, then measure.
    await Promise.all(clients.map((c) => CopyFrom.run(c, text, copyRows(accountId, spanCount))))
    const latencies: Array<number> = []
    let next = 0
    let rows = 0
    const cpu0 = cpuSnapshot(serverPid) // before the connections close: an exited backend's CPU is gone
    const start = performance.now()
    await Promise.all(clients.map(async (client) => {
      while (next < batches) {
        next++
        const data = copyRows(accountId, spanCount)
        const t0 = performance.now()
        const copied = await CopyFrom.run(client, text, data)
        rows += copied
        latencies.push(performance.now() - t0)
      }
    }))
    const seconds = (performance.now() - start) / 1000
    const cpu = coresBusy(cpu0, cpuSnapshot(serverPid))
    return { batches: latencies.length, rows, seconds, latencies, cpu }
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})))
  }
}

const detail = async (url: string, databaseUrl: string, serverPid: number, spanCount: number, requests: number) => {
  const body = makeTraceBody(spanCount)
  const traceId = (JSON.parse(body) as { id: string }).id
  const created = await fetch(`${url}/api/v1/traces`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-key": KEY },
    body
  })
  if (created.status !== 200) throw new Error(`creating the ${spanCount}-span trace: HTTP ${created.status} ${await created.text()}`)
  await created.arrayBuffer()

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
  const cpu0 = cpuSnapshot(serverPid)
  for (let i = 0; i < requests; i++) {
    const t0 = performance.now()
    const res = await get()
    await res.arrayBuffer()
    if (res.status !== 200) throw new Error(`GET detail: HTTP ${res.status}`)
    latencies.push(performance.now() - t0)
  }
  const cpu = coresBusy(cpu0, cpuSnapshot(serverPid))

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
  return { latencies, selectLatencies, responseBytes, cpu }
}

// ---------------------------------------------------------------------------------------------- main

const cleanups: Array<() => Promise<void>> = []
let cleaning: Promise<void> | undefined
const cleanup = () =>
  (cleaning ??= (async () => {
    for (const step of cleanups.reverse()) {
      try {
        await step()
      } catch (e) {
        console.error(`cleanup: ${e}`)
      }
    }
  })())

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    console.error(`\n${signal}: cleaning up`)
    void cleanup().finally(() => process.exit(130))
  })
}

const started = performance.now()
const log = (message: string) =>
  console.error(`[bench +${((performance.now() - started) / 1000).toFixed(1)}s] ${message}`)

const main = async () => {
  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  const pgVersion = (await admin.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? "?"
  const database = `tapedeck_bench_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`
  await admin.query(`CREATE DATABASE ${database}`)
  await admin.end()
  cleanups.push(async () => {
    const client = new pg.Client({ connectionString: ADMIN_URL })
    await client.connect()
    try {
      await client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      log(`dropped database ${database}`)
    } finally {
      await client.end()
    }
  })
  const databaseUrl = withDatabase(ADMIN_URL, database)

  log(`database ${database}; starting the server`)
  const server = await startServer(databaseUrl)
  cleanups.push(async () => {
    const t0 = performance.now()
    await server.stop()
    log(`server stopped (${((performance.now() - t0) / 1000).toFixed(1)} s)`)
  })

  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  cleanups.push(() => db.end())

  const sampleSpans = makeSpans(SPANS, clock)
  const spanBytes = sampleSpans.reduce((n, s) => n + JSON.stringify(s).length, 0) / sampleSpans.length

  log(`warm-up: ${WARMUP_SECONDS} s of POST /api/v1/traces at concurrency ${CONCURRENCY}`)
  const warm = await ingest(server.url, WARMUP_SECONDS, CONCURRENCY, SPANS)
  if (warm.errors > 0) throw new Error(`warm-up failed: ${warm.firstError}\nserver output:\n${server.output()}`)

  await db.query("CHECKPOINT")
  log(`ingest: ${SECONDS} s of POST /api/v1/traces (${SPANS} spans, ~${Math.round(spanBytes)} B each) at concurrency ${CONCURRENCY}`)
  const ingestCpu0 = cpuSnapshot(server.pid)
  const api = await ingest(server.url, SECONDS, CONCURRENCY, SPANS)
  const ingestCpu = coresBusy(ingestCpu0, cpuSnapshot(server.pid))
  if (api.errors > 0) throw new Error(`${api.errors} POSTs failed: ${api.firstError}\nserver output:\n${server.output()}`)
  const apiTracesPerSecond = api.traces / api.seconds
  const apiSpansPerSecond = apiTracesPerSecond * SPANS
  const apiLatency = latencyStats(api.latencies)

  const accountId = (await db.query<{ account_id: string }>("SELECT account_id FROM traces LIMIT 1")).rows[0]?.account_id
  if (!accountId) throw new Error("no trace was stored")
  await db.query("CREATE TABLE spans_copy (LIKE spans INCLUDING ALL)")
  await db.query("CHECKPOINT")
  log(`ceiling: ${api.traces} COPYs of ${SPANS} rows into spans_copy over ${CONCURRENCY} connections`)
  const copy = await copyCeiling(databaseUrl, server.pid, accountId, api.traces, CONCURRENCY, SPANS)
  const copySpansPerSecond = copy.rows / copy.seconds
  const copyBatchesPerSecond = copy.batches / copy.seconds
  const copyLatency = latencyStats(copy.latencies)

  log(`detail: GET /api/v1/traces/{id} of a ${DETAIL_SPANS}-span trace, ${DETAIL_REQUESTS} sequential requests`)
  const read = await detail(server.url, databaseUrl, server.pid, DETAIL_SPANS, DETAIL_REQUESTS)
  const getLatency = latencyStats(read.latencies)
  const selectLatency = latencyStats(read.selectLatencies)

  // Everything the API acknowledged is stored.
  const stored = (await db.query<{ traces: string; spans: string; api_row: string; copy_row: string }>(
    `SELECT (SELECT count(*) FROM traces) AS traces, (SELECT count(*) FROM spans) AS spans,
            (SELECT avg(pg_column_size(s.*))::int FROM (SELECT * FROM spans LIMIT 10000) s) AS api_row,
            (SELECT avg(pg_column_size(s.*))::int FROM (SELECT * FROM spans_copy LIMIT 10000) s) AS copy_row`
  )).rows[0]!
  const expectedTraces = warm.traces + api.traces + 1
  const expectedSpans = (warm.traces + api.traces) * SPANS + DETAIL_SPANS
  if (Number(stored.traces) !== expectedTraces || Number(stored.spans) !== expectedSpans) {
    throw new Error(`stored ${stored.traces} traces / ${stored.spans} spans, expected ${expectedTraces} / ${expectedSpans}`)
  }

  const mark = (ok: boolean) => (ok ? " ✓" : " ✗")
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
    ["POST /api/v1/traces latency p50", fmtMs(apiLatency.p50), "—", `${fmtMs(copyLatency.p50)} (COPY)`, fmtRatio(copyLatency.p50 / apiLatency.p50)],
    ["POST /api/v1/traces latency p99", fmtMs(apiLatency.p99), "—", `${fmtMs(copyLatency.p99)} (COPY)`, fmtRatio(copyLatency.p99 / apiLatency.p99)],
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
    "| metric | value | target | ceiling | ratio |",
    "|---|---|---|---|---|",
    ...rows.map((r) => `| ${r.join(" | ")} |`),
    "",
    `Command: \`${COMMAND}\``,
    "",
    `- Machine: ${availableParallelism()} CPUs, Bun ${Bun.version}, PostgreSQL ${pgVersion}; server \`bun src/main.ts\` in its own process on a fresh database.`,
    `- Ingest: ${fmtInt(api.traces)} traces (${fmtInt(api.traces * SPANS)} spans, ${(api.bodyBytes / api.traces / 1024).toFixed(1)} KiB bodies, spans ~${Math.round(spanBytes)} B of JSON) in ${api.seconds.toFixed(1)} s after a ${WARMUP_SECONDS} s warm-up; 0 errors; every acknowledged span verified stored.`,
    `- Ceiling: the same number of spans, same columns and payload sizes, by \`COPY spans_copy FROM STDIN\` (\`LIKE spans INCLUDING ALL\`: same primary key and index, no foreign key), one COPY of ${SPANS} rows per trace over ${CONCURRENCY} connections: ${fmtInt(copy.rows)} rows in ${copy.seconds.toFixed(1)} s. Average stored row: ${stored.api_row} B via the API, ${stored.copy_row} B via COPY.`,
    `- Detail: ${DETAIL_REQUESTS} sequential GETs after 20 warm-up ones, ${(read.responseBytes / 1024).toFixed(0)} KiB responses; ceiling \`SELECT * FROM spans WHERE trace_id = $1\` through pg.`,
    `- CPU, average cores busy of ${availableParallelism()} (server process / all postgres processes / this client / anything else): ` +
    [["ingest", ingestCpu], ["COPY", copy.cpu], ["GET detail", read.cpu]].map(([name, c]) => {
      const cpu = c as ReturnType<typeof coresBusy>
      return `${name} ${cpu.server} / ${cpu.postgres} / ${cpu.client} / ${cpu.other}`
    }).join("; ") + ".",
    "- ratio: the fraction of the ceiling reached (throughput: value ÷ ceiling; latency: ceiling ÷ value)."
  ]
  console.log(lines.join("\n"))
}

try {
  await main()
} catch (e) {
  process.exitCode = 1
  console.error(e instanceof Error ? e.stack ?? e.message : e)
} finally {
  await cleanup()
}

