/**
 * What the benchmarks under test/bench share: env knobs, a fresh database, the service (`bun src/app/main.ts`) in its
 * own process, cleanup on exit, error or Ctrl-C, CPU accounting from /proc, latency statistics and the printed
 * report's formatting. Each script keeps its own payloads and measurements.
 */
import { readdirSync, readFileSync } from "node:fs"
import { resolve } from "node:path"
import pg from "pg"

// ---------------------------------------------------------------------------------------------- settings

const env = process.env

/** The knob `name` as a positive number, `fallback` when unset or empty; throws on anything else. */
export const numberEnv = (name: string, fallback: number) => {
  const raw = env[name]
  if (raw === undefined || raw === "") return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got '${raw}'`)
  return n
}

/** BENCH_DATABASE_URL, or the local test server: where fresh databases are created and dropped. */
export const ADMIN_URL = env.BENCH_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test"
/** BENCH_CPU_PROF: a directory the server writes its CPU profile to on exit, or undefined for no profiling. */
export const CPU_PROF = env.BENCH_CPU_PROF || undefined
/** TAPEDECK_WORKERS of the server under test: API processes sharing its port (1 = a single process). */
export const SERVER_WORKERS = Math.max(1, Math.floor(Number(env.BENCH_SERVER_WORKERS ?? "1")) || 1)
/** The repository root, the server's working directory. */
export const ROOT = resolve(import.meta.dir, "../..")
/** The service key the server is started with. */
export const KEY = "svc_bench_key_0001"

/**
 * ANALYZE after the warm-up (default): planner statistics as autovacuum keeps them in a running system. A fresh
 * database has none, and autovacuum's first pass (autovacuum_naptime, 1 min by default; off on some machines)
 * comes after a benchmark ends; BENCH_ANALYZE=off measures that cold state.
 */
export const ANALYZE_AFTER_WARMUP = !["off", "0", "false", "no"].includes((env.BENCH_ANALYZE ?? "").toLowerCase())
export const analyzeNote = ANALYZE_AFTER_WARMUP
  ? "ANALYZE after the warm-up, the statistics autovacuum keeps in a running system"
  : "BENCH_ANALYZE=off: no planner statistics, as in a fresh database"

/** A URL as printed: any password masked (anything that is not a URL unchanged). */
export const masked = (value: string) => {
  try {
    const url = new URL(value)
    if (url.password) url.password = "***"
    return url.toString()
  } catch {
    return value
  }
}

/** The command that reproduces this run: the `knobs` that are set (database password masked), then `bun script`. */
export const commandLine = (knobs: ReadonlyArray<string>, script: string) =>
  [
    ...knobs.filter((k) => env[k]).map((k) => `${k}=${k === "BENCH_DATABASE_URL" ? masked(env[k]!) : env[k]}`),
    `bun ${script}`
  ].join(" ")

// ---------------------------------------------------------------------------------------------- helpers

/** Resolves after `ms`. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Whether `promise` settled within `ms`; the timer never outlives it, so it cannot hold the process open. */
export const within = async (promise: Promise<unknown>, ms: number) => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timedOut = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms)))
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true
      ),
      timedOut
    ])
  } finally {
    clearTimeout(timer)
  }
}

/** The nearest-rank `q` quantile of ascending `sorted`; NaN when empty. */
export const percentile = (sorted: ReadonlyArray<number>, q: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!

/** The median of `xs` (the mean of the two middle values when their count is even); NaN when empty. */
export const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/** The TAPEDECK_* settings given to a benchmark script, for the servers it starts. */
export const tapedeckSettings = (): Record<string, string> =>
  Object.fromEntries(
    Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith("TAPEDECK_") && e[1] !== undefined)
  )

/** The checkouts an A/B script compares: BENCH_AB_ROOTS (comma-separated directories), default this one. */
export const abRoots = () => (env.BENCH_AB_ROOTS || ROOT).split(",").map((s) => resolve(s.trim()))

/** The machine's 1- and 5-minute load averages ("?" where /proc is missing). */
export const loadAverages = () => {
  try {
    const [one, five] = readFileSync("/proc/loadavg", "utf8").split(" ")
    return { one: one ?? "?", five: five ?? "?" }
  } catch {
    return { one: "?", five: "?" }
  }
}

/** p50, p95, p99 (nearest rank), mean and count of `samples` (left unsorted); NaN where empty. */
export const latencyStats = (samples: ReadonlyArray<number>) => {
  const sorted = [...samples].sort((a, b) => a - b)
  const sum = sorted.reduce((a, b) => a + b, 0)
  return {
    p50: percentile(sorted, 0.5),
    p95: percentile(sorted, 0.95),
    p99: percentile(sorted, 0.99),
    mean: sorted.length === 0 ? NaN : sum / sorted.length,
    n: sorted.length
  }
}

/** A rounded integer with thousands separators (en-US). */
export const fmtInt = (n: number) => Math.round(n).toLocaleString("en-US")
/** Milliseconds with 2 decimals below 10 and 1 above. */
export const fmtMs = (n: number) => `${n.toFixed(n < 10 ? 2 : 1)} ms`
/** A ratio with 2 decimals, "n/a" when not finite. */
export const fmtRatio = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "n/a")

/** `url` with its database (path) replaced by `database`. */
export const withDatabase = (url: string, database: string) => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/** Deterministic filler words (a fixed-seed generator per process), so JSON needs no escapes and sizes stay predictable. */
const WORDS = (
  "agent tool call model prompt token result search query document answer context memory plan step " +
  "retrieve summarize evaluate reason observe action latency budget cache vector policy guard trace span"
).split(" ")
let seed = 42
const rand = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}
/** `chars` characters of plain words from a fixed-seed sequence: the same calls give the same text every run. */
export const filler = (chars: number) => {
  let s = ""
  while (s.length < chars) s += (s ? " " : "") + WORDS[Math.floor(rand() * WORDS.length)]
  return s.slice(0, chars)
}

/** The system prompt every benchmark's agent payloads carry. */
export const SYSTEM_PROMPT = "You are a careful research agent. Use the tools when they help and cite what you used."

// ---------------------------------------------------------------------------------------------- CPU accounting

/** Kernel clock ticks per second (for /proc/<pid>/stat); 100 on practically every Linux. */
const CLOCK_TICKS = (() => {
  try {
    const out = Bun.spawnSync({ cmd: ["getconf", "CLK_TCK"] })
      .stdout.toString()
      .trim()
    return Number(out) > 0 ? Number(out) : 100
  } catch {
    return 100
  }
})()

/** User + system CPU seconds of a process from /proc (Linux); 0 when unreadable. */
export const processCpuSeconds = (pid: number | string) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return 0
  }
}

/** The PostgreSQL backends connected to `db`'s database now, `db`'s own left out. */
const databaseBackends = async (db: pg.Client) =>
  (
    await db.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
  ).rows.map((r) => r.pid)

/** Where `backendCpuSince` counts from: the CPU seconds each backend of `db`'s database has used so far. */
export const backendCpuMark = async (db: pg.Client) =>
  new Map((await databaseBackends(db)).map((pid) => [pid, processCpuSeconds(pid)]))

/**
 * CPU seconds the PostgreSQL backends of `db`'s database have used since `mark` (a backend opened since counts from
 * its start; one closed since is lost). The backends must run on this machine (/proc).
 */
export const backendCpuSince = async (db: pg.Client, mark: ReadonlyMap<number, number>) => {
  let total = 0
  for (const pid of await databaseBackends(db)) total += processCpuSeconds(pid) - (mark.get(pid) ?? 0)
  return total
}

/** CPU seconds of a process and its live children (the API's worker processes under TAPEDECK_WORKERS). */
export const processTreeCpuSeconds = (pid: number) => {
  let total = processCpuSeconds(pid)
  try {
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
        if (ppid === pid) total += processCpuSeconds(entry)
      } catch {
        // exited meanwhile
      }
    }
  } catch {
    // no /proc
  }
  return total
}

interface PostgresProcess {
  /** Its own user + system CPU seconds. */
  readonly cpu: number
  /** For the postmaster (a postgres process whose parent is not one): its reaped children's CPU seconds; else 0. */
  readonly reaped: number
}

/** Every `postgres` process on this machine by pid (backends, WAL writer, checkpointer, ...); empty without /proc. */
const postgresProcesses = () => {
  const fieldsByPid = new Map<string, Array<string>>()
  try {
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
        if (stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) === "postgres") {
          fieldsByPid.set(entry, stat.slice(stat.lastIndexOf(")") + 2).split(" "))
        }
      } catch {
        // exited meanwhile
      }
    }
  } catch {
    // no /proc
  }
  const byPid = new Map<string, PostgresProcess>()
  for (const [pid, fields] of fieldsByPid) {
    byPid.set(pid, {
      cpu: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS,
      reaped: fieldsByPid.has(fields[1]!) ? 0 : (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS
    })
  }
  return byPid
}

/** How PostgreSQL's CPU between two snapshots is counted (each script keeps the way it has always counted it). */
// - "live": the postgres processes alive at each snapshot (a backend that exits in between takes its CPU away);
// - "reaped": as "live", plus what the postmaster's exited children used (closed backends, parallel and
//   autovacuum workers that came and went are counted too);
// - "perPid": processes alive at the end, less what each of them had at the start.
export type PostgresCpu = "live" | "reaped" | "perPid"

/** CPU seconds used so far by the machine, the server, each postgres process and this process, at `at`. */
export interface CpuSnapshot {
  readonly at: number
  readonly machine: number
  readonly server: number
  readonly postgres: ReadonlyMap<string, PostgresProcess>
  readonly client: number
}

/** Average cores busy between two snapshots; `serverSeconds` is the server's CPU seconds in between. */
export interface CoresBusy {
  readonly server: number
  readonly postgres: number
  readonly client: number
  readonly other: number
  readonly serverSeconds: number
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

const postgresSeconds = (mode: PostgresCpu, a: CpuSnapshot, b: CpuSnapshot) => {
  const total = (s: CpuSnapshot) => {
    let n = 0
    for (const p of s.postgres.values()) n += p.cpu + (mode === "reaped" ? p.reaped : 0)
    return n
  }
  if (mode !== "perPid") return total(b) - total(a)
  let n = 0
  for (const [pid, p] of b.postgres) n += p.cpu - (a.postgres.get(pid)?.cpu ?? 0)
  return n
}

/** Snapshots of the server, PostgreSQL, this process and the machine, and the cores each kept busy in between (PostgreSQL counted as `mode` says). */
export const cpuMeter = (mode: PostgresCpu) => {
  const snapshot = (serverPid: number): CpuSnapshot => {
    const usage = process.cpuUsage()
    return {
      at: performance.now(),
      machine: machineBusySeconds(),
      server: processTreeCpuSeconds(serverPid),
      postgres: postgresProcesses(),
      client: (usage.user + usage.system) / 1e6
    }
  }
  const busy = (a: CpuSnapshot, b: CpuSnapshot): CoresBusy => {
    const seconds = (b.at - a.at) / 1000
    const server = b.server - a.server
    const postgres = postgresSeconds(mode, a, b)
    const client = b.client - a.client
    const other = b.machine - a.machine - server - postgres - client
    const f = (x: number) => Math.max(0, x / seconds)
    return { server: f(server), postgres: f(postgres), client: f(client), other: f(other), serverSeconds: server }
  }
  return { snapshot, busy }
}
/** A `cpuMeter`: `snapshot(serverPid)` and `busy(a, b)`. */
export type CpuMeter = ReturnType<typeof cpuMeter>

/** "server / postgres / client / other" cores, 2 decimals each. */
export const fmtCores = (c: CoresBusy) => [c.server, c.postgres, c.client, c.other].map((x) => x.toFixed(2)).join(" / ")

// ---------------------------------------------------------------------------------------------- cleanup and logging

const cleanups: Array<() => Promise<void>> = []
let cleaning: Promise<void> | undefined
let started = performance.now()

/** Registers a cleanup step: steps run once, last registered first, each despite the others' failures. */
export const onCleanup = (step: () => Promise<void>) => {
  cleanups.push(step)
}

/** Runs the cleanup steps (once, however often called). */
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

/** A progress line on stderr, stamped with the seconds since the benchmark started. */
export const log = (message: string) =>
  console.error(`[bench +${((performance.now() - started) / 1000).toFixed(1)}s] ${message}`)

/** Runs `main`, then always the cleanup (also on Ctrl-C/SIGTERM, exit 130); a failure sets exit code 1 and is printed unless `quietAfterSignal` and a signal came first. */
export const runBench = async (main: () => Promise<void>, options: { readonly quietAfterSignal?: boolean } = {}) => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      console.error(`\n${signal}: cleaning up`)
      void cleanup().finally(() => process.exit(130))
    })
  }
  started = performance.now()
  try {
    await main()
  } catch (e) {
    process.exitCode = 1
    if (!options.quietAfterSignal || cleaning === undefined)
      console.error(e instanceof Error ? (e.stack ?? e.message) : e)
  } finally {
    await cleanup()
  }
}

// ---------------------------------------------------------------------------------------------- database

/**
 * A new database `prefix` + 12 random hex digits on ADMIN_URL's server, dropped WITH FORCE at cleanup (registered
 * before the CREATE, so even a half-done one goes), unless BENCH_KEEP_DATABASES is set: then it is kept (and named in
 * the log) for inspection afterwards.
 */
export const freshDatabase = async (prefix = "tapedeck_bench_") => {
  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  const settings = (
    await admin.query<{ v: string; av: string }>(
      "SELECT current_setting('server_version') AS v, current_setting('autovacuum') AS av"
    )
  ).rows[0]
  const database = `${prefix}${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`
  onCleanup(async () => {
    if (process.env.BENCH_KEEP_DATABASES) return log(`kept database ${database}`)
    const client = new pg.Client({ connectionString: ADMIN_URL })
    await client.connect()
    try {
      await client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      log(`dropped database ${database}`)
    } finally {
      await client.end()
    }
  })
  try {
    await admin.query(`CREATE DATABASE ${database}`)
  } finally {
    await admin.end()
  }
  return {
    database,
    databaseUrl: withDatabase(ADMIN_URL, database),
    pgVersion: settings?.v ?? "?",
    autovacuum: settings?.av ?? "?"
  }
}

/** A connected pg client, ended at cleanup. */
export const connect = async (databaseUrl: string) => {
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  onCleanup(() => db.end())
  return db
}

/** `concurrency` connected pg clients; the caller ends them. */
export const connectMany = (databaseUrl: string, concurrency: number) =>
  Promise.all(
    Array.from({ length: concurrency }, async () => {
      const client = new pg.Client({ connectionString: databaseUrl })
      await client.connect()
      return client
    })
  )

// ---------------------------------------------------------------------------------------------- server

/** The running service: its base URL, pid, output tail and an idempotent stop (SIGTERM, SIGKILL after 15 s). */
export interface Server {
  readonly url: string
  readonly pid: number
  /** The tail of the server's stdout and stderr. */
  readonly output: () => string
  readonly stop: () => Promise<void>
}

/** A TCP port free on loopback now. */
export const freePort = () => {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

/** SIGTERM to a child that still runs, SIGKILL if it has not exited within `graceMs`. */
const terminate = async (proc: Bun.Subprocess, graceMs: number) => {
  if (proc.exitCode !== null || proc.signalCode !== null) return
  proc.kill("SIGTERM")
  if (!(await within(proc.exited, graceMs))) {
    proc.kill("SIGKILL")
    await proc.exited
  }
}
/**
 * `bun src/app/main.ts` in its own process on `databaseUrl` (KEY, no rate limit, then `extraEnv`, then the TAPEDECK_*
 * settings given to the benchmark script, which win; no other inherited TAPEDECK_* or BENCH_* vars), answering /health
 * 200 within 60 s or thrown; stopped at cleanup.
 */
export const startServer = async (
  databaseUrl: string,
  options: {
    readonly extraEnv?: Record<string, string>
    readonly tailChars?: number
    /** The checkout whose src/app/main.ts runs (default: this one), e.g. another branch's worktree for an A/B. */
    readonly root?: string
  } = {}
): Promise<Server> => {
  const tailChars = options.tailChars ?? 20_000
  const port = freePort()
  const inherited = Object.fromEntries(
    Object.entries(env).filter(([k]) => !k.startsWith("TAPEDECK_") && !k.startsWith("BENCH_") && k !== "DATABASE_URL")
  )
  const profile = CPU_PROF ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${resolve(CPU_PROF)}`] : []
  const proc = Bun.spawn({
    cmd: [process.execPath, ...profile, "src/app/main.ts"],
    cwd: options.root ?? ROOT,
    env: {
      ...inherited,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      HOST: "127.0.0.1",
      TAPEDECK_API_KEYS: `bench=${KEY}`,
      TAPEDECK_RATE_LIMIT_PER_MINUTE: "100000000",
      TAPEDECK_WORKERS: String(SERVER_WORKERS),
      TAPEDECK_LOG_LEVEL: "warn", // Effect reads the label (WARN), case-insensitively; "Warning" is refused
      // As `npx bun run start` and the Docker image run it (docs/configuration.md).
      MIMALLOC_PURGE_DELAY: env.MIMALLOC_PURGE_DELAY ?? "-1",
      ...options.extraEnv,
      ...tapedeckSettings()
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe"
  })
  // Drain the server's output (a full pipe would stall it); keep the tail for error reports.
  let tail = ""
  const drain = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder()
    for await (const chunk of stream) tail = (tail + decoder.decode(chunk, { stream: true })).slice(-tailChars)
  }
  const drained = Promise.all([drain(proc.stdout), drain(proc.stderr)]).catch(() => {})
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    await terminate(proc, 15_000)
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
  onCleanup(async () => {
    const t0 = performance.now()
    await stop()
    log(`server stopped (${((performance.now() - t0) / 1000).toFixed(1)} s)`)
  })
  return { url, pid: proc.pid, output: () => tail, stop }
}

// ---------------------------------------------------------------------------------------------- report

/** " ✓" when `ok`, else " ✗". */
export const mark = (ok: boolean) => (ok ? " ✓" : " ✗")

/** A markdown table: the `header` row, its separator, then one line per row. */
export const tableLines = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => [
  `| ${header.join(" | ")} |`,
  `|${header.map(() => "---").join("|")}|`,
  ...rows.map((r) => `| ${r.join(" | ")} |`)
]

/** Jobs queued or running on the database under test. */
export const pendingJobs = async (db: pg.Client) =>
  Number(
    (await db.query<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE status IN ('queued', 'running')")).rows[0]!.n
  )

/** Waits (up to `seconds`) for the job queue to drain; what was pending, what is left and how long it took. */
export const drainJobs = async (db: pg.Client, seconds: number) => {
  const start = performance.now()
  const before = await pendingJobs(db)
  let left = before
  while (left > 0 && performance.now() - start < seconds * 1000) {
    await sleep(250)
    left = await pendingJobs(db)
  }
  return { before, left, seconds: (performance.now() - start) / 1000 }
}

/**
 * A ceiling server: `bun -e script` in its own process (from the repository root, so it can import the project's
 * packages), which prints "PORT n" once listening. Stopped at cleanup.
 */
export const startBareServer = async (script: string, env: Record<string, string> = {}) => {
  const proc = Bun.spawn({
    cmd: [process.execPath, "-e", script],
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "inherit"
  })
  const stop = () => terminate(proc, 5000)
  onCleanup(async () => {
    await stop()
    log("bare server stopped")
  })
  const reader = proc.stdout.getReader()
  const decoder = new TextDecoder()
  let out = ""
  const deadline = Date.now() + 10_000
  while (!/PORT (\d+)/.test(out)) {
    if (Date.now() > deadline) throw new Error(`the bare server did not start: ${out}`)
    const { value, done } = await reader.read()
    if (done) throw new Error(`the bare server exited: ${out}`)
    out += decoder.decode(value, { stream: true })
  }
  reader.releaseLock()
  void proc.stdout.pipeTo(new WritableStream()).catch(() => {})
  const port = Number(/PORT (\d+)/.exec(out)![1])
  return { url: `http://127.0.0.1:${port}`, pid: proc.pid, stop }
}
