/**
 * Runtime-enforcement benchmark against a real PostgreSQL (not a test file: run it with `bun test/bench/enforcement.ts`).
 * Every latency is client-observed: from a check's scheduled send time to its parsed answer in this process (open loop,
 * so no coordinated omission), loopback and HTTP included. Default duration about a minute and a half.
 *
 * 1. Creates a fresh database on BENCH_DATABASE_URL's server and starts the service (`bun src/app/main.ts`) on it as a
 *    separate process, then creates 20 account-wide guardrail policies of all nine types that (nearly) always allow.
 *    Starts the ceiling beside it: a bare `Bun.serve` in its own process that performs one INSERT per request (the
 *    request body, into a table of the same database) over a pool of as many connections as the service's checks
 *    have (TAPEDECK_ENFORCEMENT_DB_CONNECTIONS, default 4), and answers a constant allow.
 * 2. Checks (POST /api/v1/enforcement/check) each carry a tool, model, proposed cost and tokens, a fresh args hash and
 *    their run's next step; one check in 50 names a denied tool (a block). Every scenario uses runs of its own.
 * 3. Contention: open loop at BENCH_RATE checks/s for BENCH_PHASE_SECONDS over each of BENCH_CONTENTION_RUNS runs
 *    (64: parallel tool calls and sub-agents sharing runs; 8: heavier sharing; 1,000: little), then rounds of 8
 *    checks sent at once on one run (BENCH_ROUNDS rounds). The bare server gets the same open loop.
 * 4. Sustained: closed loop, BENCH_CONCURRENCY checks in flight for BENCH_SECONDS, against the bare server's.
 * 5. Overload: the export rate the service sustains alone (OTLP/JSON exports, closed loop at
 *    TAPEDECK_INGEST_MAX_INFLIGHT for 3 s), then twice that rate (BENCH_OVERLOAD_FACTOR) offered open loop for
 *    BENCH_OVERLOAD_SECONDS beside BENCH_RATE checks/s; then the same export overload on the service beside
 *    BENCH_RATE requests/s to the bare server (same machine, same PostgreSQL, same run). Exports may be shed (503 +
 *    Retry-After): counted, not retried.
 * 6. Verifies every check answered 200 with the expected verdict and every decision was recorded; prints a markdown
 *    table; drops the database and stops both servers (also on error or Ctrl-C).
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_RATE, BENCH_CONTENTION_RUNS (comma-separated), BENCH_PHASE_SECONDS, BENCH_ROUNDS,
 * BENCH_SECONDS, BENCH_CONCURRENCY, BENCH_OVERLOAD_SECONDS, BENCH_OVERLOAD_FACTOR, BENCH_WARMUP_SECONDS,
 * BENCH_CPU_PROF (a directory: the server runs under `bun --cpu-prof --cpu-prof-md` and writes its profile there on
 * exit); TAPEDECK_* settings given to this script are passed to the server (e.g. TAPEDECK_ENFORCEMENT_DB_CONNECTIONS).
 */
import { availableParallelism } from "node:os"
import {
  commandLine,
  connect,
  cpuMeter,
  type CoresBusy,
  fmtCores,
  fmtInt,
  fmtMs,
  fmtRatio,
  freshDatabase,
  latencyStats,
  log,
  mark,
  numberEnv,
  runBench,
  sleep,
  startBareServer,
  startServer,
  tableLines,
  tapedeckSettings
} from "./Harness.ts"
import {
  CheckSource,
  createPolicies,
  DENIED_EVERY,
  DENIED_TOOL,
  addTally,
  type ExportTally,
  newTally,
  openLoop as scheduledLoop,
  POLICIES,
  SPANS_PER_TRACE,
  sendCheck,
  sendExport,
  type Tally,
  type Target,
  TRACES_PER_EXPORT
} from "./EnforcementLoad.ts"

// ---------------------------------------------------------------------------------------------- settings

const RATE = numberEnv("BENCH_RATE", 1000)
const CONTENTION_RUNS = (process.env.BENCH_CONTENTION_RUNS || "64,8,1000").split(",").map((s) => {
  const n = Number(s.trim())
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`BENCH_CONTENTION_RUNS must be positive integers, got '${process.env.BENCH_CONTENTION_RUNS}'`)
  return n
})
const PHASE_SECONDS = numberEnv("BENCH_PHASE_SECONDS", 5)
const ROUNDS = Math.floor(numberEnv("BENCH_ROUNDS", 100))
const SECONDS = numberEnv("BENCH_SECONDS", 5)
const CONCURRENCY = Math.floor(numberEnv("BENCH_CONCURRENCY", 32))
const OVERLOAD_SECONDS = numberEnv("BENCH_OVERLOAD_SECONDS", 8)
/** The exports offered in the overload phase, as a multiple of the rate the service takes alone (2: twice it). */
const OVERLOAD_FACTOR = numberEnv("BENCH_OVERLOAD_FACTOR", 2)
const WARMUP_SECONDS = numberEnv("BENCH_WARMUP_SECONDS", 3)
/** The service's settings this script was given (passed on), and the two it reads itself. */
const SERVER_ENV = tapedeckSettings()
const CHECK_CONNECTIONS = Number(SERVER_ENV.TAPEDECK_ENFORCEMENT_DB_CONNECTIONS ?? 4) || 4
const INGEST_MAX_INFLIGHT = Number(SERVER_ENV.TAPEDECK_INGEST_MAX_INFLIGHT ?? 8) || 8

const TARGET_P99_MS = 10
const TARGET_BARE_RATIO = 0.5
const TARGET_OVERLOAD_P99_RATIO = 2
/** Open loop: a scheduled request finding this many still unanswered is not sent (counted as dropped). */
const MAX_INFLIGHT = 256

const KNOBS = [
  "BENCH_DATABASE_URL",
  "BENCH_RATE",
  "BENCH_CONTENTION_RUNS",
  "BENCH_PHASE_SECONDS",
  "BENCH_ROUNDS",
  "BENCH_SECONDS",
  "BENCH_CONCURRENCY",
  "BENCH_OVERLOAD_SECONDS",
  "BENCH_OVERLOAD_FACTOR",
  "BENCH_WARMUP_SECONDS",
  "BENCH_CPU_PROF",
  ...Object.keys(SERVER_ENV)
]
const COMMAND = commandLine(KNOBS, "test/bench/enforcement.ts")

/** PostgreSQL CPU: live processes plus the postmaster's reaped children (the pool's backends stay up anyway). */
const CPU = cpuMeter("reaped")

// ---------------------------------------------------------------------------------------------- load

interface PhaseResult {
  readonly sent: number
  readonly seconds: number
  /** Open loop: scheduled requests not sent because MAX_INFLIGHT were unanswered. */
  readonly dropped: number
  /** Client-observed latencies, ms. */
  readonly latencies: Array<number>
  readonly tally: Tally
  readonly cpu: CoresBusy
  /** Open loop: how late this client sent, ms (p99). */
  readonly lagP99?: number
}

/** `rate` requests/s on a fixed schedule for `seconds` (EnforcementLoad's `openLoop`), with the cores busy meanwhile. */
const openLoop = async (
  pid: number,
  rate: number,
  seconds: number,
  request: () => Promise<void>
): Promise<Omit<PhaseResult, "tally">> => {
  const cpu0 = CPU.snapshot(pid)
  const { sent, dropped, seconds: elapsed, latencies, lags } = await scheduledLoop(rate, seconds, MAX_INFLIGHT, request)
  return {
    sent,
    dropped,
    seconds: elapsed,
    latencies,
    cpu: CPU.busy(cpu0, CPU.snapshot(pid)),
    lagP99: latencyStats(lags).p99
  }
}

/** `concurrency` workers, each sending its next request as soon as the previous one is answered, for `seconds`. */
const closedLoop = async (
  pid: number,
  concurrency: number,
  seconds: number,
  request: () => Promise<void>
): Promise<Omit<PhaseResult, "tally">> => {
  const latencies: Array<number> = []
  let sent = 0
  const cpu0 = CPU.snapshot(pid)
  const start = performance.now()
  const end = start + seconds * 1000
  const worker = async () => {
    while (performance.now() < end) {
      sent++
      const t0 = performance.now()
      await request()
      latencies.push(performance.now() - t0)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return {
    sent,
    dropped: 0,
    seconds: (performance.now() - start) / 1000,
    latencies,
    cpu: CPU.busy(cpu0, CPU.snapshot(pid))
  }
}

const checkLoad = (target: Target, source: CheckSource, phase: number, tally: Tally) => () =>
  sendCheck(target, source.next(phase), tally)

// ---------------------------------------------------------------------------------------------- the bare server

/** One INSERT per request over a pool as large as the checks' own, then a constant allow. */
const BARE_SCRIPT = `
const { default: pg } = await import("pg")
const pool = new pg.Pool({ connectionString: process.env.BARE_DATABASE_URL, max: Number(process.env.BARE_POOL) })
await pool.query("CREATE TABLE IF NOT EXISTS bare_requests (id uuid PRIMARY KEY, body text NOT NULL, at timestamptz NOT NULL DEFAULT now())")
const body = JSON.stringify({ verdict: "allow", policy_id: null, policy_type: null, reason: "no policy blocks or holds this action" })
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    await pool.query("INSERT INTO bare_requests (id, body) VALUES ($1, $2)", [crypto.randomUUID(), await req.text()])
    return new Response(body, { headers: { "content-type": "application/json" } })
  }
})
console.log("PORT " + server.port)
`

// ---------------------------------------------------------------------------------------------- main

const rate = (r: { sent: number; seconds: number }) => r.sent / r.seconds
const pair = (a: number, b: number) => `${fmtMs(a).replace(" ms", "")} / ${fmtMs(b)}`

const main = async () => {
  const { database, databaseUrl, pgVersion } = await freshDatabase()
  log(`database ${database}; starting the server and the bare one-INSERT server`)
  const server = await startServer(databaseUrl)
  const bare = await startBareServer(BARE_SCRIPT, {
    BARE_DATABASE_URL: databaseUrl,
    BARE_POOL: String(CHECK_CONNECTIONS)
  })
  const db = await connect(databaseUrl)

  const denyPolicyId = await createPolicies(server.url)
  const service: Target = { url: server.url, denyPolicyId }
  const bareTarget: Target = { url: bare.url, denyPolicyId: undefined }
  const total = newTally()
  let checksSent = 0
  let phase = 0
  /** Runs one phase of checks against the service; its decisions carry `phase`. */
  const checks = async (name: string, run: (tally: Tally, phase: number) => Promise<Omit<PhaseResult, "tally">>) => {
    const tally = newTally()
    phase++
    log(name)
    const result = { ...(await run(tally, phase)), tally, phase }
    addTally(total, tally)
    checksSent += result.sent
    await sleep(300)
    return result
  }
  const bareTally = newTally()
  const bareRun = async (name: string, run: (tally: Tally) => Promise<Omit<PhaseResult, "tally">>) => {
    log(`bare: ${name}`)
    const result = await run(bareTally)
    await sleep(300)
    return result
  }

  await checks(`warm-up: ${WARMUP_SECONDS} s closed loop at concurrency 8`, (tally, p) =>
    closedLoop(server.pid, 8, WARMUP_SECONDS, checkLoad(service, new CheckSource(1000, "warmup"), p, tally))
  )
  await bareRun("warm-up", (tally) =>
    closedLoop(bare.pid, 8, 1, checkLoad(bareTarget, new CheckSource(1000, "warmup"), 0, tally))
  )

  const contention: Array<{ runs: number; result: PhaseResult & { phase: number } }> = []
  for (const runs of CONTENTION_RUNS) {
    contention.push({
      runs,
      result: await checks(
        `contention: open loop ${fmtInt(RATE)} checks/s over ${fmtInt(runs)} runs for ${PHASE_SECONDS} s`,
        (tally, p) =>
          openLoop(
            server.pid,
            RATE,
            PHASE_SECONDS,
            checkLoad(service, new CheckSource(runs, `contention-${runs}`), p, tally)
          )
      )
    })
  }
  const bareOpen = await bareRun(`open loop ${fmtInt(RATE)} req/s for ${PHASE_SECONDS} s`, (tally) =>
    openLoop(bare.pid, RATE, PHASE_SECONDS, checkLoad(bareTarget, new CheckSource(1000, "bare"), 0, tally))
  )

  /** Rounds of 8 checks sent at once on one run (8 parallel tool calls); latency per check and per round. */
  const roundLatencies: Array<number> = []
  const oneRun = await checks(`one run: ${ROUNDS} rounds of 8 checks at once`, async (tally, p) => {
    const source = new CheckSource(1, "one-run")
    const latencies: Array<number> = []
    const cpu0 = CPU.snapshot(server.pid)
    const start = performance.now()
    for (let r = 0; r < ROUNDS; r++) {
      const t0 = performance.now()
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          const c0 = performance.now()
          await sendCheck(service, source.next(p), tally)
          latencies.push(performance.now() - c0)
        })
      )
      roundLatencies.push(performance.now() - t0)
    }
    return {
      sent: ROUNDS * 8,
      dropped: 0,
      seconds: (performance.now() - start) / 1000,
      latencies,
      cpu: CPU.busy(cpu0, CPU.snapshot(server.pid))
    }
  })

  const closed = await checks(
    `sustained: closed loop at concurrency ${CONCURRENCY} for ${SECONDS} s over 1,000 runs`,
    (tally, p) =>
      closedLoop(server.pid, CONCURRENCY, SECONDS, checkLoad(service, new CheckSource(1000, "closed"), p, tally))
  )
  const bareClosed = await bareRun(`closed loop at concurrency ${CONCURRENCY} for ${SECONDS} s`, (tally) =>
    closedLoop(bare.pid, CONCURRENCY, SECONDS, checkLoad(bareTarget, new CheckSource(1000, "bare"), 0, tally))
  )

  log(`ingest alone: closed loop of exports at concurrency ${INGEST_MAX_INFLIGHT} for 3 s`)
  const alone: ExportTally = { accepted: 0, shed: 0 }
  const ingestAlone = await closedLoop(server.pid, INGEST_MAX_INFLIGHT, 3, () => sendExport(server.url, alone))
  const ingestRate = alone.accepted / ingestAlone.seconds
  const offered = Math.max(2, OVERLOAD_FACTOR * ingestRate)
  await sleep(500)

  const overloadWith = async (target: "service" | "bare") => {
    const exports: ExportTally = { accepted: 0, shed: 0 }
    const load = openLoop(server.pid, offered, OVERLOAD_SECONDS, () => sendExport(server.url, exports))
    const name = `overload: ${fmtInt(offered)} exports/s (${OVERLOAD_FACTOR} × ${fmtInt(ingestRate)}) beside ${fmtInt(RATE)} ${target === "service" ? "checks" : "bare requests"}/s for ${OVERLOAD_SECONDS} s`
    const requests =
      target === "service"
        ? await checks(name, (tally, p) =>
            openLoop(
              server.pid,
              RATE,
              OVERLOAD_SECONDS,
              checkLoad(service, new CheckSource(1000, "overload"), p, tally)
            )
          )
        : await bareRun(name, (tally) =>
            openLoop(bare.pid, RATE, OVERLOAD_SECONDS, checkLoad(bareTarget, new CheckSource(1000, "bare"), 0, tally))
          )
    const exportResult = await load
    await sleep(1500) // exports shed meanwhile: let the service settle before the next phase
    return { requests, exports, exportResult }
  }
  const overload = await overloadWith("service")
  const overloadBare = await overloadWith("bare")

  // Every check was recorded (fail-closed blocks are recorded off the hot path, in batches): wait for the last ones.
  const deadline = Date.now() + 120_000
  let recorded = 0
  for (;;) {
    recorded = Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM enforcement_decisions")).rows[0]!.n)
    if (recorded >= checksSent || Date.now() > deadline) break
    await sleep(200)
  }
  if (recorded !== checksSent) throw new Error(`${recorded} decisions recorded for ${checksSent} checks`)
  const serverSide = new Map<number, Array<number>>()
  for (const row of (
    await db.query<{ phase: number; ms: number }>(
      "SELECT (step_index / 1000000)::int AS phase, latency_ms AS ms FROM enforcement_decisions"
    )
  ).rows) {
    let list = serverSide.get(row.phase)
    if (!list) serverSide.set(row.phase, (list = []))
    list.push(row.ms)
  }
  await server.stop()
  await bare.stop()
  if (bareTally.unexpected > 0) throw new Error(`the bare server answered unexpectedly: ${bareTally.firstUnexpected}`)

  // ------------------------------------------------------------------------------------------ report

  const rows: Array<[string, string, string, string, string]> = []
  const bareOpenLatency = latencyStats(bareOpen.latencies)
  const notes = (r: PhaseResult & { phase: number }) => {
    const srv = latencyStats(serverSide.get(r.phase) ?? [])
    return `achieved ${fmtInt(rate(r))}/s, ${fmtInt(r.dropped)} dropped, ${fmtInt(r.tally.failClosed)} fail-closed; server-side p99 ${fmtMs(srv.p99)}`
  }
  for (const { runs, result } of contention) {
    const client = latencyStats(result.latencies)
    const ok = client.p99 <= TARGET_P99_MS && result.dropped === 0 && result.tally.failClosed === 0
    rows.push([
      `contention: ${fmtInt(RATE)} checks/s open loop over ${fmtInt(runs)} runs × ${PHASE_SECONDS} s (${notes(result)}): p50 / p99`,
      pair(client.p50, client.p99),
      `p99 ≤ ${TARGET_P99_MS} ms, none dropped or fail-closed${mark(ok)}`,
      `${pair(bareOpenLatency.p50, bareOpenLatency.p99)} (bare, ${fmtInt(RATE)} req/s)`,
      fmtRatio(bareOpenLatency.p99 / client.p99)
    ])
  }
  const perCheck = latencyStats(oneRun.latencies)
  const perRound = latencyStats(roundLatencies)
  rows.push([
    `contention: 8 checks at once on one run × ${ROUNDS} rounds (${fmtInt(oneRun.tally.failClosed)} fail-closed): per check p50 / p99; per round p99 ${fmtMs(perRound.p99)}`,
    pair(perCheck.p50, perCheck.p99),
    `none fail-closed${mark(oneRun.tally.failClosed === 0)}`,
    "—",
    "—"
  ])
  const closedRate = rate(closed)
  const bareRate = rate(bareClosed)
  const closedLatency = latencyStats(closed.latencies)
  const bareClosedLatency = latencyStats(bareClosed.latencies)
  rows.push([
    `sustained: closed loop, concurrency ${CONCURRENCY} × ${SECONDS} s (p50 / p99 ${pair(closedLatency.p50, closedLatency.p99)}; bare ${pair(bareClosedLatency.p50, bareClosedLatency.p99)})`,
    `${fmtInt(closedRate)} checks/s`,
    `≥ ${TARGET_BARE_RATIO} × bare = ${fmtInt(TARGET_BARE_RATIO * bareRate)}/s${mark(closedRate / bareRate >= TARGET_BARE_RATIO)}`,
    `${fmtInt(bareRate)} req/s (bare)`,
    fmtRatio(closedRate / bareRate)
  ])
  const overloadChecks = overload.requests as PhaseResult & { phase: number }
  const ov = latencyStats(overloadChecks.latencies)
  const ovBare = latencyStats(overloadBare.requests.latencies)
  const exportNote = (o: typeof overload) =>
    `${fmtInt(o.exports.accepted)} exports taken, ${fmtInt(o.exports.shed)} shed (503), ${fmtInt(o.exportResult.dropped)} not sent`
  rows.push([
    `overload: ${fmtInt(RATE)} checks/s beside ${fmtInt(offered)} exports/s offered (${OVERLOAD_FACTOR} × the ${fmtInt(ingestRate)}/s taken alone) × ${OVERLOAD_SECONDS} s (${notes(overloadChecks)}; ${exportNote(overload)}): p50 / p99`,
    pair(ov.p50, ov.p99),
    `p99 ≤ ${TARGET_OVERLOAD_P99_RATIO} × bare = ${fmtMs(TARGET_OVERLOAD_P99_RATIO * ovBare.p99)}${mark(ov.p99 <= TARGET_OVERLOAD_P99_RATIO * ovBare.p99 && overloadChecks.tally.failClosed === 0)}`,
    `${pair(ovBare.p50, ovBare.p99)} (bare, same export overload on the service; ${exportNote(overloadBare)})`,
    fmtRatio(ovBare.p99 / ov.p99)
  ])

  const verdicts = `${fmtInt(total.allow)} allow, ${fmtInt(total.block)} block (${fmtInt(total.failClosed)} fail-closed), ${fmtInt(total.hold)} hold`
  const lines = [
    ...tableLines(["metric", "value", "target", "ceiling", "ratio"], rows),
    "",
    `Command: \`${COMMAND}\``,
    "",
    `- Machine: ${availableParallelism()} CPUs, Bun ${Bun.version}, PostgreSQL ${pgVersion}; the service (\`bun src/app/main.ts\`, its own process, shared pool ${SERVER_ENV.TAPEDECK_DB_POOL_MAX ?? "10"}, checks' own pool ${CHECK_CONNECTIONS}), the bare server (pool ${CHECK_CONNECTIONS}), PostgreSQL and this client share the machine; all figures from one run, the service's and the bare server's phases one after the other.`,
    "- Latency: client-observed, from each request's scheduled send time (open loop) or its send (closed loop, rounds) to its parsed answer in this client: loopback, HTTP, authentication, the wait for a connection, the statement and its commit all count. Server-side p99 (in the notes) is the `latency_ms` the service records with each decision: from the check's start to its statement's end in PostgreSQL (not HTTP, not the commit).",
    `- ratio: the fraction of the ceiling reached (throughput: value ÷ ceiling; latency: ceiling ÷ value). Dropped: scheduled requests not sent because ${MAX_INFLIGHT} were unanswered. Fail-closed: blocks with policy_id null (no decision within TAPEDECK_ENFORCEMENT_TIMEOUT_MS).`,
    `- Policies: ${POLICIES.length} account-wide, all nine types (budget_usd, token_budget, max_steps, tool_denylist ×3, tool_allowlist ×2, model_allowlist ×2, loop_breaker ×2, rate ×2, require_approval ×3 for tools/models never used), so no check takes the run's lock.`,
    `- Checks: ${fmtInt(checksSent)} in all, each with a tool, model, proposed_usd, proposed_tokens, a fresh tool_args_hash and its run's next step_index; one in ${DENIED_EVERY} names \`${DENIED_TOOL}\` (blocked by the first tool_denylist). Every one answered 200: ${verdicts}; ${total.unexpected === 0 ? "all as expected" : `${fmtInt(total.unexpected)} unexpected, first: ${total.firstUnexpected}`}; ${fmtInt(recorded)} decisions recorded.`,
    `- Exports: OTLP/JSON, ${TRACES_PER_EXPORT} traces × ${SPANS_PER_TRACE} spans each (model and tool calls with GenAI attributes); alone the service took ${fmtInt(ingestRate)} exports/s (${fmtInt(ingestRate * TRACES_PER_EXPORT * SPANS_PER_TRACE)} spans/s) at concurrency ${INGEST_MAX_INFLIGHT}.`,
    `- Client lag (open loop, p99): ${contention.map((c) => `${fmtInt(c.runs)} runs ${fmtMs(c.result.lagP99 ?? NaN)}`).join(", ")}, bare ${fmtMs(bareOpen.lagP99 ?? NaN)}, overload ${fmtMs(overload.requests.lagP99 ?? NaN)}, bare overload ${fmtMs(overloadBare.requests.lagP99 ?? NaN)}.`,
    `- CPU, average cores busy of ${availableParallelism()} (service / all postgres processes / this client / anything else): ` +
      [
        ...contention.map((c) => [`${fmtInt(c.runs)} runs`, c.result.cpu] as const),
        ["sustained", closed.cpu] as const,
        ["overload", overload.requests.cpu] as const,
        ["bare open loop", bareOpen.cpu] as const,
        ["bare closed loop", bareClosed.cpu] as const
      ]
        .map(([name, cpu]) => `${name} ${fmtCores(cpu)}`)
        .join("; ") +
      " (the bare rows count the bare server as the service)."
  ]
  console.log(lines.join("\n"))
}

await runBench(main)
