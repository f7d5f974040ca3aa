/**
 * Runtime-enforcement benchmark against a real PostgreSQL (not a test file: run it with `bun test/bench/enforcement.ts`).
 *
 * 1. Creates a fresh database on BENCH_DATABASE_URL's server and starts the service (`bun src/main.ts`) on it as a
 *    separate process, then creates 20 account-wide guardrail policies of all nine types that (nearly) always allow.
 * 2. Checks (POST /api/v1/enforcement/check) round-robin over BENCH_RUNS runs, each with a tool, model, proposed
 *    cost and tokens, a fresh args hash and its run's next step; one check in 50 names a denied tool (a block).
 * 3. Open loop: after a warm-up, checks sent on a fixed schedule at each of BENCH_RATES checks/s for
 *    BENCH_PHASE_SECONDS each. Latency is taken per check twice: client-observed (from the scheduled send time to
 *    the parsed answer, so loopback, HTTP and any lag of this client count; no coordinated omission) and
 *    server-side (the `latency_ms` the server records with each decision: from the check's start through evaluation
 *    to its statement's run in PostgreSQL; neither a wait for a free connection nor the commit is in it).
 * 4. Closed loop: BENCH_CONCURRENCY checks in flight for BENCH_SECONDS: the sustained checks/s.
 * 5. Ceiling: a bare `Bun.serve` in its own process (`bun -e`), reading the same request and answering a constant
 *    allow JSON, driven the same way (closed loop, and open loop at the target rate) in the same run.
 * 6. Verifies every check answered 200 with the expected verdict and every decision was recorded; prints a markdown
 *    table; drops the database and stops both servers (also on error or Ctrl-C).
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_RATES (comma-separated checks/s), BENCH_PHASE_SECONDS, BENCH_SECONDS,
 * BENCH_WARMUP_SECONDS, BENCH_CONCURRENCY, BENCH_RUNS, BENCH_CPU_PROF (a directory: the server runs under
 * `bun --cpu-prof --cpu-prof-md` and writes its profile there on exit).
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
  KEY,
  latencyStats,
  log,
  mark,
  numberEnv,
  runBench,
  sleep,
  startBareServer,
  startServer,
  tableLines
} from "./Harness.ts"

// ---------------------------------------------------------------------------------------------- settings

const RATES = (process.env.BENCH_RATES || "250,500,1000,2000").split(",").map((s) => {
  const n = Number(s.trim())
  if (!Number.isFinite(n) || n <= 0) throw new Error(`BENCH_RATES must be positive numbers, got '${process.env.BENCH_RATES}'`)
  return n
})
const PHASE_SECONDS = numberEnv("BENCH_PHASE_SECONDS", 5)
const SECONDS = numberEnv("BENCH_SECONDS", 5)
const WARMUP_SECONDS = numberEnv("BENCH_WARMUP_SECONDS", 3)
const CONCURRENCY = Math.floor(numberEnv("BENCH_CONCURRENCY", 32))
const RUNS = Math.floor(numberEnv("BENCH_RUNS", 1000))

const TARGET_RATE = 1000
const TARGET_P99_MS = 5
const TARGET_BARE_RATIO = 0.4
/** Open loop: a scheduled check finding this many still unanswered is not sent (counted), so an overloaded phase ends on time. */
const MAX_INFLIGHT = 256
/** Seconds of open loop at TARGET_RATE against the bare server (its latency ceiling). */
const BARE_OPEN_SECONDS = Math.min(3, PHASE_SECONDS)

const KNOBS = [
  "BENCH_DATABASE_URL", "BENCH_RATES", "BENCH_PHASE_SECONDS", "BENCH_SECONDS", "BENCH_WARMUP_SECONDS",
  "BENCH_CONCURRENCY", "BENCH_RUNS", "BENCH_CPU_PROF"
]
const COMMAND = commandLine(KNOBS, "test/bench/enforcement.ts")

/** PostgreSQL CPU: live processes plus the postmaster's reaped children (the pool's backends stay up anyway). */
const CPU = cpuMeter("reaped")

// ---------------------------------------------------------------------------------------------- policies

/** The tools checks use (all on the allow list), the one denied tool, and the models (all allowed). */
const TOOLS = ["web_search", "read_file", "write_file", "calculator", "fetch_url", "sql_query", "summarize", "send_email"]
const DENIED_TOOL = "shell.exec"
const MODELS = ["gpt-4o-mini-2024-07-18", "claude-3-5-sonnet-20241022", "gemini-1.5-pro"]

/** 20 account-wide policies, all nine types; the first tool_denylist is the only one that ever answers (DENIED_TOOL). */
const POLICIES: ReadonlyArray<Record<string, unknown>> = [
  { type: "budget_usd", name: "run budget", params: { max_usd: 1_000_000 } },
  { type: "token_budget", name: "run tokens", params: { max_tokens: 1e13 } },
  { type: "max_steps", name: "run steps", params: { max_steps: 1e12 } },
  { type: "tool_denylist", name: "no shell", params: { patterns: ["shell.*", "rm", "sudo*", "exec_*"] } },
  { type: "tool_allowlist", name: "known tools", params: { patterns: [...TOOLS, "search_*", "*_file"] } },
  { type: "model_allowlist", name: "approved models", params: { patterns: ["gpt-4o*", "claude-3-5-*", "gemini-1.5-*"] } },
  { type: "loop_breaker", name: "no loops", params: { max_repeats: 1000 } },
  { type: "rate", name: "per-second rate", params: { max_calls: 1000, window_seconds: 1 } },
  { type: "require_approval", name: "money moves", params: { tool_patterns: ["wire_*", "payments.transfer"] } },
  { type: "tool_denylist", name: "no destructive tools", params: { patterns: ["*delete*", "drop_*", "truncate_*"] } },
  { type: "budget_usd", name: "hard ceiling", params: { max_usd: 1e12 } },
  { type: "token_budget", name: "token ceiling", params: { max_tokens: 1e15 } },
  { type: "max_steps", name: "step ceiling", params: { max_steps: 999_999_999_999 } },
  { type: "model_allowlist", name: "any model", params: { patterns: ["*"] } },
  { type: "loop_breaker", name: "windowed loops", params: { max_repeats: 500, window_steps: 10_000 } },
  { type: "rate", name: "per-minute rate", params: { max_calls: 1000, window_seconds: 60 } },
  { type: "require_approval", name: "premium models", params: { model_patterns: ["o1-pro*"], expires_in_seconds: 3600 } },
  { type: "tool_denylist", name: "no payments", params: { patterns: ["payments.*", "refund_?"] } },
  { type: "tool_allowlist", name: "broad tools", params: { patterns: ["*"] } },
  { type: "require_approval", name: "emails to all", params: { tool_patterns: ["broadcast_*"], approval_scope: "run" } }
]

// ---------------------------------------------------------------------------------------------- checks

/** The check every N-th request makes with DENIED_TOOL (blocked by the first tool_denylist). */
const DENIED_EVERY = 50

/**
 * The checks of one phase: round-robin over RUNS runs, each run's steps counting up. `step_index` carries the
 * phase (phase × 10^6 + step), so the decisions the server records can be told apart by phase.
 */
class CheckSource {
  private k = 0
  private readonly steps = new Uint32Array(RUNS)
  next(phase: number) {
    const k = this.k++
    const run = k % RUNS
    const step = this.steps[run]!++
    const denied = k % DENIED_EVERY === DENIED_EVERY - 1
    const body = JSON.stringify({
      run_id: `bench-run-${String(run).padStart(5, "0")}`,
      tool_name: denied ? DENIED_TOOL : TOOLS[k % TOOLS.length],
      tool_args_hash: `args-${step}-${k % 9973}`,
      model: MODELS[k % MODELS.length],
      proposed_usd: 0.0001 * (1 + (k % 7)),
      proposed_tokens: 100 + (k % 400),
      step_index: phase * 1_000_000 + step
    })
    return { body, expected: denied ? ("block" as const) : ("allow" as const) }
  }
}

interface Tally {
  allow: number
  block: number
  hold: number
  /** Blocks with policy_id null: "policy state unavailable" (fail-closed, e.g. a timeout). */
  failClosed: number
  /** Verdicts other than the one expected (allow, or a block by the first tool_denylist). */
  unexpected: number
  firstUnexpected?: string | undefined
}
const newTally = (): Tally => ({ allow: 0, block: 0, hold: 0, failClosed: 0, unexpected: 0 })
const addTally = (a: Tally, b: Tally) => {
  a.allow += b.allow
  a.block += b.block
  a.hold += b.hold
  a.failClosed += b.failClosed
  a.unexpected += b.unexpected
  a.firstUnexpected ??= b.firstUnexpected
}

interface Target {
  readonly url: string
  /** The denylist policy expected to block DENIED_TOOL; undefined for the bare server (answers allow to all). */
  readonly denyPolicyId: string | undefined
}

/** POSTs one check; throws unless 200 with a verdict; tallies it. */
const send = async (target: Target, check: { body: string; expected: "allow" | "block" }, tally: Tally) => {
  const res = await fetch(`${target.url}/api/v1/enforcement/check`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-key": KEY },
    body: check.body
  })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`check answered HTTP ${res.status}: ${text.slice(0, 500)}`)
  let decision: { verdict?: unknown; policy_id?: unknown; reason?: unknown }
  try {
    decision = JSON.parse(text)
  } catch {
    throw new Error(`check answered 200 without JSON: ${text.slice(0, 500)}`)
  }
  const verdict = decision.verdict
  if (verdict !== "allow" && verdict !== "block" && verdict !== "hold") throw new Error(`check answered no verdict: ${text.slice(0, 500)}`)
  tally[verdict]++
  if (verdict === "block" && decision.policy_id === null) tally.failClosed++
  const expected = target.denyPolicyId === undefined ? "allow" : check.expected
  const ok = verdict === expected && (verdict !== "block" || decision.policy_id === target.denyPolicyId)
  if (!ok) {
    tally.unexpected++
    tally.firstUnexpected ??= `${check.body} → ${text.slice(0, 300)}`
  }
}

// ---------------------------------------------------------------------------------------------- load

interface PhaseResult {
  readonly sent: number
  readonly seconds: number
  /** Open loop: scheduled checks not sent because MAX_INFLIGHT were unanswered. */
  readonly skipped: number
  /** Client-observed latencies, ms. */
  readonly latencies: Array<number>
  readonly tally: Tally
  readonly cpu: CoresBusy
  /** Open loop: how late this client sent, ms (p99 and max). */
  readonly lagP99?: number
  readonly lagMax?: number
}

/** `rate` checks/s on a fixed schedule for `seconds`; latency from each check's scheduled time to its parsed answer. */
const openLoop = async (target: Target, pid: number, source: CheckSource, phase: number, rate: number, seconds: number): Promise<PhaseResult> => {
  const total = Math.max(1, Math.round(rate * seconds))
  const interval = 1000 / rate
  const latencies: Array<number> = []
  const lags: Array<number> = []
  const tally = newTally()
  const inflight: Array<Promise<void>> = []
  let pending = 0
  let skipped = 0
  let failure: unknown
  const cpu0 = CPU.snapshot(pid)
  const start = performance.now() + 2
  let i = 0
  while (i < total && failure === undefined) {
    const now = performance.now()
    while (i < total && start + i * interval <= now) {
      const scheduled = start + i * interval
      i++
      if (pending >= MAX_INFLIGHT) {
        skipped++
        continue
      }
      lags.push(now - scheduled)
      const check = source.next(phase)
      pending++
      inflight.push(
        send(target, check, tally).then(
          () => void latencies.push(performance.now() - scheduled),
          (e) => void (failure ??= e)
        ).finally(() => void pending--)
      )
    }
    if (i < total) await sleep(Math.max(0, start + i * interval - performance.now()))
  }
  await Promise.all(inflight)
  const seconds_ = (performance.now() - start) / 1000
  const cpu = CPU.busy(cpu0, CPU.snapshot(pid))
  if (failure !== undefined) throw failure
  const lag = latencyStats(lags)
  return { sent: total - skipped, skipped, seconds: seconds_, latencies, tally, cpu, lagP99: lag.p99, lagMax: Math.max(...lags) }
}

/** `concurrency` workers, each sending its next check as soon as the previous one is answered, for `seconds`. */
const closedLoop = async (target: Target, pid: number, source: CheckSource, phase: number, concurrency: number, seconds: number): Promise<PhaseResult> => {
  const latencies: Array<number> = []
  const tally = newTally()
  let sent = 0
  const cpu0 = CPU.snapshot(pid)
  const start = performance.now()
  const end = start + seconds * 1000
  const worker = async () => {
    while (performance.now() < end) {
      const check = source.next(phase)
      sent++
      const t0 = performance.now()
      await send(target, check, tally)
      latencies.push(performance.now() - t0)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  const elapsed = (performance.now() - start) / 1000
  return { sent, skipped: 0, seconds: elapsed, latencies, tally, cpu: CPU.busy(cpu0, CPU.snapshot(pid)) }
}

// ---------------------------------------------------------------------------------------------- the bare server

const BARE_SCRIPT = `
const body = JSON.stringify({ verdict: "allow", policy_id: null, policy_type: null, reason: "no policy blocks or holds this action" })
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    await req.text()
    return new Response(body, { headers: { "content-type": "application/json" } })
  }
})
console.log("PORT " + server.port)
`

// ---------------------------------------------------------------------------------------------- main

const rate = (r: PhaseResult) => r.sent / r.seconds
const pair = (a: number, b: number) => `${fmtMs(a).replace(" ms", "")} / ${fmtMs(b)}`

const main = async () => {
  const { database, databaseUrl, pgVersion } = await freshDatabase()
  log(`database ${database}; starting the server`)
  const server = await startServer(databaseUrl)
  const db = await connect(databaseUrl)

  let denyPolicyId: string | undefined
  for (const policy of POLICIES) {
    const res = await fetch(`${server.url}/api/v1/guardrails`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-service-key": KEY },
      body: JSON.stringify(policy)
    })
    const text = await res.text()
    if (res.status !== 200) throw new Error(`creating ${JSON.stringify(policy)}: HTTP ${res.status} ${text}`)
    const created = JSON.parse(text) as { id: string; type: string }
    if (created.type === "tool_denylist") denyPolicyId ??= created.id
    await sleep(2) // distinct created_at: creation order is evaluation order
  }
  const enforcement: Target = { url: server.url, denyPolicyId }
  const source = new CheckSource()
  const total = newTally()
  let sent = 0
  const account = (r: PhaseResult) => {
    addTally(total, r.tally)
    sent += r.sent
    return r
  }

  log(`warm-up: ${WARMUP_SECONDS} s closed loop at concurrency 8 (${POLICIES.length} policies, ${RUNS} runs)`)
  account(await closedLoop(enforcement, server.pid, source, 0, 8, WARMUP_SECONDS))

  const open: Array<{ rate: number; result: PhaseResult; phase: number }> = []
  for (const [n, r] of RATES.entries()) {
    await sleep(500)
    log(`open loop: ${fmtInt(r)} checks/s for ${PHASE_SECONDS} s`)
    const phase = n + 1
    open.push({ rate: r, phase, result: account(await openLoop(enforcement, server.pid, source, phase, r, PHASE_SECONDS)) })
  }
  await sleep(500)
  const closedPhase = RATES.length + 1
  log(`closed loop: concurrency ${CONCURRENCY} for ${SECONDS} s`)
  const closed = account(await closedLoop(enforcement, server.pid, source, closedPhase, CONCURRENCY, SECONDS))

  // Every check was recorded (fail-closed blocks off the hot path, in batches): wait for the last ones, then
  // read the server's latencies.
  const drainStart = performance.now()
  const deadline = Date.now() + 180_000
  let recorded = 0
  for (;;) {
    recorded = Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM enforcement_decisions")).rows[0]!.n)
    if (recorded >= sent || Date.now() > deadline) break
    await sleep(200)
  }
  const recordDrainSeconds = (performance.now() - drainStart) / 1000
  if (recorded !== sent) throw new Error(`${recorded} decisions recorded for ${sent} checks`)
  const serverSide = new Map<number, Array<number>>()
  for (const row of (await db.query<{ phase: number; ms: number }>(
    "SELECT (step_index / 1000000)::int AS phase, latency_ms AS ms FROM enforcement_decisions"
  )).rows) {
    let list = serverSide.get(row.phase)
    if (!list) serverSide.set(row.phase, (list = []))
    list.push(row.ms)
  }
  const runRows = Number((await db.query<{ n: string }>("SELECT count(*) AS n FROM enforcement_runs")).rows[0]!.n)
  await server.stop()
  log("server stopped; starting the bare Bun.serve")

  const bare = await startBareServer(BARE_SCRIPT)
  const bareTarget: Target = { url: bare.url, denyPolicyId: undefined }
  const bareSource = new CheckSource()
  const bareTally = newTally()
  addTally(bareTally, (await closedLoop(bareTarget, bare.pid, bareSource, 0, CONCURRENCY, 1)).tally)
  log(`bare: open loop ${fmtInt(TARGET_RATE)} req/s for ${BARE_OPEN_SECONDS} s, then closed loop at concurrency ${CONCURRENCY} for ${SECONDS} s`)
  const bareOpen = await openLoop(bareTarget, bare.pid, bareSource, 0, TARGET_RATE, BARE_OPEN_SECONDS)
  await sleep(300)
  const bareClosed = await closedLoop(bareTarget, bare.pid, bareSource, 0, CONCURRENCY, SECONDS)
  addTally(bareTally, bareOpen.tally)
  addTally(bareTally, bareClosed.tally)
  await bare.stop()
  if (bareTally.unexpected > 0) throw new Error(`the bare server answered unexpectedly: ${bareTally.firstUnexpected}`)

  // ------------------------------------------------------------------------------------------ report

  const closedRate = rate(closed)
  const bareRate = rate(bareClosed)
  const bareRatio = closedRate / bareRate
  const bareOpenLatency = latencyStats(bareOpen.latencies)
  const rows: Array<[string, string, string, string, string]> = []
  for (const { rate: r, phase, result } of open) {
    const client = latencyStats(result.latencies)
    const srv = latencyStats(serverSide.get(phase) ?? [])
    const atTarget = r === TARGET_RATE
    const notes = [
      `achieved ${fmtInt(rate(result))}/s`,
      ...(result.skipped > 0 ? [`${fmtInt(result.skipped)} not sent`] : []),
      ...(result.tally.failClosed > 0 ? [`${fmtInt(result.tally.failClosed)} fail-closed`] : [])
    ]
    const label = `open loop ${fmtInt(r)} checks/s × ${PHASE_SECONDS} s (${notes.join(", ")})`
    rows.push([
      `${label}: server-side p50 / p99`,
      pair(srv.p50, srv.p99),
      atTarget ? `p99 ≤ ${TARGET_P99_MS} ms${mark(srv.p99 <= TARGET_P99_MS)}` : "—",
      "—",
      "—"
    ])
    rows.push([
      `${label}: client-observed p50 / p99 (incl. loopback)`,
      pair(client.p50, client.p99),
      atTarget ? `p99 ≤ ${TARGET_P99_MS} ms${mark(client.p99 <= TARGET_P99_MS)}` : "—",
      atTarget ? `${pair(bareOpenLatency.p50, bareOpenLatency.p99)} (bare)` : "—",
      atTarget ? fmtRatio(bareOpenLatency.p99 / client.p99) : "—"
    ])
  }
  // Sustained: every scheduled check sent and answered at ≥ 95 % of the offered rate, none fail-closed.
  const sustained = open.filter((o) => o.result.skipped === 0 && rate(o.result) >= 0.95 * o.rate && o.result.tally.failClosed === 0)
  const bestOpen = sustained.length === 0 ? undefined : sustained.reduce((a, b) => (b.rate > a.rate ? b : a))
  rows.push([
    "highest open-loop rate sustained (all sent, ≥ 95 % achieved, none fail-closed)",
    bestOpen ? `${fmtInt(bestOpen.rate)} checks/s` : "none",
    `≥ ${fmtInt(TARGET_RATE)} checks/s${mark((bestOpen?.rate ?? 0) >= TARGET_RATE)}`,
    "—",
    "—"
  ])
  const closedClient = latencyStats(closed.latencies)
  const closedServer = latencyStats(serverSide.get(closedPhase) ?? [])
  const bareClosedLatency = latencyStats(bareClosed.latencies)
  rows.push([
    `closed loop, concurrency ${CONCURRENCY} × ${SECONDS} s: sustained checks/s`,
    `${fmtInt(closedRate)}/s`,
    `≥ ${TARGET_BARE_RATIO} × bare = ${fmtInt(TARGET_BARE_RATIO * bareRate)}/s${mark(bareRatio >= TARGET_BARE_RATIO)}`,
    `${fmtInt(bareRate)} req/s (bare)`,
    fmtRatio(bareRatio)
  ])
  rows.push([
    "closed loop: server-side p50 / p99",
    pair(closedServer.p50, closedServer.p99),
    "—",
    "—",
    "—"
  ])
  rows.push([
    "closed loop: client-observed p50 / p99 (incl. loopback)",
    pair(closedClient.p50, closedClient.p99),
    "—",
    `${pair(bareClosedLatency.p50, bareClosedLatency.p99)} (bare)`,
    fmtRatio(bareClosedLatency.p99 / closedClient.p99)
  ])

  const verdicts = `${fmtInt(total.allow)} allow, ${fmtInt(total.block)} block (${fmtInt(total.failClosed)} fail-closed), ${fmtInt(total.hold)} hold`
  const lines = [
    ...tableLines(["metric", "value", "target", "ceiling", "ratio"], rows),
    "",
    `Command: \`${COMMAND}\``,
    "",
    `- Machine: ${availableParallelism()} CPUs, Bun ${Bun.version}, PostgreSQL ${pgVersion}; server \`bun src/main.ts\` in its own process on a fresh database (pool ${process.env.TAPEDECK_DB_POOL_MAX ?? "default 10"}); this client, the server, PostgreSQL and the bare server share the machine.`,
    `- Policies: ${POLICIES.length} account-wide, all nine types (budget_usd, token_budget, max_steps, tool_denylist ×3, tool_allowlist ×2, model_allowlist ×2, loop_breaker ×2, rate ×2, require_approval ×3 for tools/models never used), so no check needs the run's lock: each is one statement that records the decision and, on allow, advances the run's counters if the run is still the version evaluated.`,
    `- Checks: ${fmtInt(sent)} over ${fmtInt(RUNS)} runs round-robin (${fmtInt(runRows)} run rows), each with a tool, model, proposed_usd, proposed_tokens, a fresh tool_args_hash and its run's next step_index; one in ${DENIED_EVERY} names \`${DENIED_TOOL}\` (blocked by the first tool_denylist). Every one answered 200 with a verdict: ${verdicts}; ${total.unexpected === 0 ? "all as expected" : `${fmtInt(total.unexpected)} unexpected, first: ${total.firstUnexpected}`}; ${fmtInt(recorded)} decisions recorded (the last ${recordDrainSeconds.toFixed(1)} s after the closed loop ended: fail-closed blocks are recorded in batches, off the hot path).`,
    `- Latency: server-side = the \`latency_ms\` the server records with each decision (from the check's start through cached policies and evaluation to its statement's run in PostgreSQL; not a wait for a free connection, the commit, HTTP parsing, authentication or writing the answer). Client-observed = from the check's scheduled send time to its parsed answer in this client (open loop; includes loopback, HTTP and this client's own scheduling lag, p99 ${open.map((o) => `${fmtInt(o.rate)}/s ${fmtMs(o.result.lagP99 ?? NaN)}`).join(", ")}); closed loop from send to answer.`,
    `- Phases: ${WARMUP_SECONDS} s warm-up (concurrency 8), then open loop at ${RATES.map(fmtInt).join(", ")} checks/s for ${PHASE_SECONDS} s each, then closed loop at concurrency ${CONCURRENCY} for ${SECONDS} s. Open-loop achieved rates: ${open.map((o) => `${fmtInt(o.rate)} → ${fmtInt(rate(o.result))}`).join(", ")} checks/s.`,
    `- Ceiling: a bare \`Bun.serve\` (\`bun -e\`, its own process, started after the service stopped) that reads the same POST and answers a constant allow JSON, driven by the same client: closed loop at concurrency ${CONCURRENCY} for ${SECONDS} s (${fmtInt(bareClosed.sent)} requests) and open loop at ${fmtInt(TARGET_RATE)} req/s for ${BARE_OPEN_SECONDS} s.`,
    `- CPU, average cores busy of ${availableParallelism()} (server process / all postgres processes / this client / anything else): ` +
    [
      ...open.map((o) => [`open ${fmtInt(o.rate)}/s`, o.result.cpu] as const),
      ["closed loop", closed.cpu] as const,
      ["bare closed loop", bareClosed.cpu] as const
    ].map(([name, cpu]) => `${name} ${fmtCores(cpu)}`).join("; ") + ".",
    "- ratio: the fraction of the ceiling reached (throughput: value ÷ ceiling; latency: ceiling ÷ value)."
  ]
  console.log(lines.join("\n"))
}

await runBench(main)
