/**
 * What one OTLP export costs the service, A/B between checkouts (not a test file: run it with
 * `bun test/bench/otlp-export-cpu.ts`): the CPU of its request thread (where enforcement checks wait behind exports),
 * of its whole process (with the thread exports are prepared on) and of the PostgreSQL backends of its database, per
 * export, and the export's client-observed latency. CPU per export moves much less than latency when the machine is
 * shared, so it is the figure to decide an ingest hot-path change by.
 *
 * 1. For each checkout in BENCH_AB_ROOTS (comma-separated directories, default this one; e.g. a detached worktree of
 *    another commit with node_modules symlinked), creates a fresh database on BENCH_DATABASE_URL's server and starts
 *    that checkout's service on it. Background jobs (search indexing) are held back
 *    (TAPEDECK_JOB_POLL_MS, TAPEDECK_JOB_DEFER_SECONDS) unless BENCH_AB_JOBS=1, so that each service's rounds count
 *    only the exports' own work, not the other's indexing.
 * 2. Warm-up: BENCH_AB_WARMUP exports per service.
 * 3. BENCH_AB_ROUNDS rounds; in each, every service in turn (A, B, B, A, ...) gets BENCH_AB_EXPORTS exports at
 *    BENCH_CONCURRENCY. BENCH_AB_WORKLOAD picks them: `checks` (default), the OTLP/JSON exports sent beside the
 *    checks of test/bench/enforcement.ts (5 traces × 10 GenAI spans, ~26 KB, fresh trace ids each); `agent`, the
 *    OTLP workload of test/bench/storage.ts (one 30-step agent run of 61 GenAI spans an export, ~1.1 MB, the system
 *    prompt and tool schemas the same in every run).
 * 4. Prints per-round and median figures per export, with the WAL the cluster wrote during each round (only the
 *    service of the round writes: jobs are held back, and the other services wait their turn).
 *
 * TAPEDECK_* settings given to this script are passed to every server.
 */
import { basename } from "node:path"
import type pg from "pg"
import { otlpBody, STEPS } from "./AgentRun.ts"
import { exportBody, SPANS_PER_TRACE, TRACES_PER_EXPORT } from "./EnforcementLoad.ts"
import {
  abRoots,
  backendCpuMark,
  backendCpuSince,
  connect,
  fmtInt,
  freshDatabase,
  KEY,
  loadAverages,
  log,
  median,
  numberEnv,
  processCpuSeconds,
  processTreeCpuSeconds,
  runBench,
  type Server,
  sleep,
  startServer,
  tableLines
} from "./Harness.ts"

const ROOTS = abRoots()
const EXPORTS = Math.floor(numberEnv("BENCH_AB_EXPORTS", 200))
const WARMUP = Math.floor(numberEnv("BENCH_AB_WARMUP", 100))
const ROUNDS = Math.floor(numberEnv("BENCH_AB_ROUNDS", 6))
const CONCURRENCY = Math.floor(numberEnv("BENCH_CONCURRENCY", 1))
const JOBS = process.env.BENCH_AB_JOBS === "1"
const AGENT = process.env.BENCH_AB_WORKLOAD === "agent"
let agentRuns = 0
/** The next export's body (BENCH_AB_WORKLOAD). */
const nextBody = () => (AGENT ? JSON.stringify(otlpBody(agentRuns++)) : exportBody())
const EXPORT_SHAPE = AGENT
  ? `one ${STEPS}-step agent run (${2 * STEPS + 1} GenAI spans, test/bench/storage.ts's OTLP workload)`
  : `${TRACES_PER_EXPORT} traces × ${SPANS_PER_TRACE} spans`
/** Jobs held back unless BENCH_AB_JOBS (TAPEDECK_* settings given to the script still win: startServer). */
const SERVER_ENV = JOBS ? {} : { TAPEDECK_JOB_POLL_MS: "3600000", TAPEDECK_JOB_DEFER_SECONDS: "3600" }

interface Round {
  readonly requestThreadMs: number
  readonly processMs: number
  readonly postgresMs: number
  /** WAL the cluster wrote during the round, per export (only this service was writing: the others wait their turn). */
  readonly walKb: number
  readonly latencyP50: number
}

interface Subject {
  readonly label: string
  readonly server: Server
  readonly db: pg.Client
  readonly rounds: Array<Round>
}

/** `count` exports at `concurrency`; throws on any answer but 200. The latency of each, in ms. */
const send = async (subject: Subject, count: number, concurrency: number) => {
  let left = count
  const latencies: Array<number> = []
  const worker = async () => {
    while (left > 0) {
      left--
      const body = nextBody()
      const t0 = performance.now()
      const res = await fetch(`${subject.server.url}/v1/traces`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-service-key": KEY },
        body
      })
      const text = await res.text()
      latencies.push(performance.now() - t0)
      if (res.status !== 200) throw new Error(`${subject.label}: export answered HTTP ${res.status}: ${text}`)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return latencies
}

/** The cluster's WAL insert position. */
const walPosition = async (db: pg.Client) =>
  (await db.query<{ lsn: string }>("SELECT pg_current_wal_insert_lsn()::text AS lsn")).rows[0]!.lsn

/** Bytes of WAL written since `from` (a `walPosition`). */
const walSince = async (db: pg.Client, from: string) =>
  Number(
    (
      await db.query<{ bytes: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)::text AS bytes", [
        from
      ])
    ).rows[0]!.bytes
  )

const round = async (subject: Subject): Promise<Round> => {
  const pid = subject.server.pid
  const thread0 = processCpuSeconds(`${pid}/task/${pid}`)
  const process0 = processTreeCpuSeconds(pid)
  const backends = await backendCpuMark(subject.db)
  const wal0 = await walPosition(subject.db)
  const latencies = await send(subject, EXPORTS, CONCURRENCY)
  const walBytes = await walSince(subject.db, wal0)
  const perExport = (seconds: number) => (seconds / EXPORTS) * 1000
  return {
    requestThreadMs: perExport(processCpuSeconds(`${pid}/task/${pid}`) - thread0),
    processMs: perExport(processTreeCpuSeconds(pid) - process0),
    postgresMs: perExport(await backendCpuSince(subject.db, backends)),
    walKb: walBytes / EXPORTS / 1024,
    latencyP50: median(latencies)
  }
}

const main = async () => {
  const subjects: Array<Subject> = []
  for (const [i, root] of ROOTS.entries()) {
    const { databaseUrl } = await freshDatabase()
    const label = `${String.fromCharCode(65 + i)} (${basename(root)})`
    log(`${label}: starting the service from ${root}`)
    const server = await startServer(databaseUrl, { extraEnv: SERVER_ENV, root })
    subjects.push({ label, server, db: await connect(databaseUrl), rounds: [] })
  }
  for (const s of subjects) {
    log(`${s.label}: warm-up, ${fmtInt(WARMUP)} exports`)
    await send(s, WARMUP, CONCURRENCY)
  }
  for (let r = 1; r <= ROUNDS; r++) {
    for (const s of r % 2 === 1 ? subjects : [...subjects].reverse()) {
      await sleep(300)
      const result = await round(s)
      s.rounds.push(result)
      log(
        `round ${r}, ${s.label}: request thread ${result.requestThreadMs.toFixed(2)} ms, process ${result.processMs.toFixed(2)} ms, PostgreSQL ${result.postgresMs.toFixed(2)} ms of CPU per export; WAL ${result.walKb.toFixed(1)} KB per export; p50 ${result.latencyP50.toFixed(2)} ms`
      )
    }
  }
  for (const s of subjects) await s.db.end()
  const load = loadAverages()
  const of = (s: Subject, key: keyof Round) => s.rounds.map((r) => r[key])
  console.log(
    [
      "",
      ...tableLines(
        [
          "service",
          "request thread CPU ms/export (rounds)",
          "median",
          "process CPU ms/export",
          "PostgreSQL CPU ms/export",
          "WAL KB/export",
          "latency p50 (median of rounds)"
        ],
        subjects.map((s) => [
          s.label,
          of(s, "requestThreadMs")
            .map((x) => x.toFixed(2))
            .join(", "),
          median(of(s, "requestThreadMs")).toFixed(2),
          median(of(s, "processMs")).toFixed(2),
          median(of(s, "postgresMs")).toFixed(2),
          median(of(s, "walKb")).toFixed(1),
          `${median(of(s, "latencyP50")).toFixed(2)} ms`
        ])
      ),
      "",
      `- Per export of ${EXPORT_SHAPE} (OTLP/JSON), ${fmtInt(EXPORTS)} exports a round at concurrency ${CONCURRENCY}, services alternating (A B, B A, ...), after ${fmtInt(WARMUP)} warm-up exports each; background jobs ${JOBS ? "running" : "held back"}. CPU: user + system from /proc (request thread: the process's main thread; process: with its other threads and processes; PostgreSQL: the backends connected to the service's database). WAL: what the cluster wrote during the round (\`pg_current_wal_insert_lsn\`), one service at a time. Load average at the end ${load.one} (1 min) / ${load.five} (5 min).`
    ].join("\n")
  )
}

await runBench(main)
