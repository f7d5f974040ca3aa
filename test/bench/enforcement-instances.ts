/**
 * Enforcement checks beside ingest overload across two instances (not a test file: run it with
 * `bun test/bench/enforcement-instances.ts`). Several instances share one PostgreSQL (TAPEDECK_WORKERS on one
 * machine, or several machines): exports taken by one load the database, and on one machine the cores, that another
 * instance's checks need, and that instance does not see the checks (ClusterPressure tells it).
 *
 * For each checkout in BENCH_AB_ROOTS (comma-separated directories, default this one; e.g. a detached worktree of
 * another commit with node_modules symlinked), in turn, BENCH_ROUNDS times (A, B, A, B, ...):
 * 1. A fresh database on BENCH_DATABASE_URL's server; two services of that checkout on it (A, then B), the 20 policies
 *    of test/bench/enforcement.ts, and a warm-up of both.
 * 2. Ingest capacity: the exports A takes alone (OTLP/JSON, 50 spans each) in a closed loop at concurrency 8 for 3 s.
 * 3. The ceiling: BENCH_RATE checks/s open loop to B for BENCH_SECONDS, nothing else running.
 * 4. Checks to A and B in turn over BENCH_SHARED_RUNS (default 8) runs, nothing else running: each run is written by
 *    both instances (an agent's parallel calls spread over instances behind a load balancer).
 * 5. Checks to A, beside BENCH_OVERLOAD_FACTOR (default 2) times A's capacity of exports offered to A, for
 *    BENCH_SECONDS (default 8).
 * 6. Checks to B, beside the same exports to A.
 * Each phase's checks go over runs of their own (64 but in phase 4). Latency is client-observed from each check's
 * scheduled send time. Dropped: checks not sent because MAX_INFLIGHT (512) were unanswered. Fail-closed: blocks with policy_id null (no
 * decision within TAPEDECK_ENFORCEMENT_TIMEOUT_MS). Every check must answer 200 with its expected verdict, every export
 * 200 or 503 with Retry-After. Neither service serves OTLP/gRPC (they would contend for its port).
 */
import {
  CheckSource,
  createPolicies,
  type ExportTally,
  newTally,
  openLoop,
  sendCheck,
  sendExport,
  type Tally
} from "./EnforcementLoad.ts"
import {
  abRoots,
  backendCpuMark,
  backendCpuSince,
  connect,
  fmtInt,
  fmtMs,
  freshDatabase,
  latencyStats,
  log,
  numberEnv,
  processCpuSeconds,
  runBench,
  type Server,
  sleep,
  startServer,
  tableLines
} from "./Harness.ts"
import { basename } from "node:path"

const ROOTS = abRoots()
const ROUNDS = Math.floor(numberEnv("BENCH_ROUNDS", 1))
const RATE = numberEnv("BENCH_RATE", 1000)
const SECONDS = numberEnv("BENCH_SECONDS", 8)
const FACTOR = numberEnv("BENCH_OVERLOAD_FACTOR", 2)
const RUNS = 64
const SHARED_RUNS = Math.floor(numberEnv("BENCH_SHARED_RUNS", 8))
const MAX_INFLIGHT = 512

interface PhaseFigures {
  readonly p50: number
  readonly p99: number
  readonly failClosed: number
  /** Checks not sent because MAX_INFLIGHT were unanswered. */
  readonly dropped: number
  readonly exportsTaken: number
  readonly exportsShed: number
  /** Average cores busy: A, B, PostgreSQL (this database's backends), this client. */
  readonly cores: readonly [number, number, number, number]
}

/**
 * A check of `source` per call, tallied (unexpected verdicts are thrown after the phase), to one of `urls`: in turn,
 * shifted by one at each pass over the `runs` runs, so that each run's checks go to every one of them.
 */
const checkTo = (
  urls: ReadonlyArray<string>,
  runs: number,
  denyPolicyId: string,
  source: CheckSource,
  tally: Tally
) => {
  let k = 0
  return () => {
    const url = urls[(k + Math.floor(k / runs)) % urls.length]!
    k++
    return sendCheck({ url, denyPolicyId }, source.next(1), tally)
  }
}

/** One checkout's run: two services on a fresh database, the ceiling and the two overload phases. */
const runCheckout = async (root: string, round: number) => {
  const { databaseUrl } = await freshDatabase()
  const options = { root, extraEnv: { TAPEDECK_OTLP_GRPC_ENABLED: "false" } }
  const a = await startServer(databaseUrl, options)
  const b = await startServer(databaseUrl, options)
  const db = await connect(databaseUrl)
  const stopAll = async () => {
    await db.end()
    await a.stop()
    await b.stop()
  }
  try {
    const denyPolicyId = await createPolicies(a.url)
    for (const server of [a, b]) {
      await openLoop(
        RATE / 2,
        2,
        MAX_INFLIGHT,
        checkTo([server.url], RUNS, denyPolicyId, new CheckSource(RUNS, `warm-${server.pid}`), newTally())
      )
    }
    // The warm-up's checks leave the instances' one-second windows before ingestion is measured.
    await sleep(2000)
    const end = performance.now() + 3000
    const exports: ExportTally = { accepted: 0, shed: 0 }
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (performance.now() < end) await sendExport(a.url, exports)
      })
    )
    const taken = exports.accepted / 3
    log(`${basename(root)}: A takes ${taken.toFixed(0)} exports/s alone`)
    await sleep(1000)

    const phase = async (
      name: string,
      targets: ReadonlyArray<Server>,
      withExports: boolean,
      runs = RUNS
    ): Promise<PhaseFigures> => {
      log(`${basename(root)} round ${round + 1}: ${name}`)
      const tally = newTally()
      const offered: ExportTally = { accepted: 0, shed: 0 }
      const cpu0 = [processCpuSeconds(a.pid), processCpuSeconds(b.pid), process.cpuUsage()] as const
      const pg0 = await backendCpuMark(db)
      const started = performance.now()
      const load = withExports
        ? openLoop(FACTOR * taken, SECONDS, MAX_INFLIGHT, () => sendExport(a.url, offered))
        : Promise.resolve(undefined)
      const { latencies, dropped } = await openLoop(
        RATE,
        SECONDS,
        MAX_INFLIGHT,
        checkTo(
          targets.map((t) => t.url),
          runs,
          denyPolicyId,
          new CheckSource(runs, `${name}-${round}`),
          tally
        )
      )
      // A check failed closed is counted (what the phase measures); any other verdict but the expected one throws.
      if (tally.unexpected > tally.failClosed)
        throw new Error(`${tally.unexpected - tally.failClosed} checks answered unexpectedly: ${tally.firstUnexpected}`)
      await load
      const seconds = (performance.now() - started) / 1000
      const client = process.cpuUsage(cpu0[2])
      const stats = latencyStats(latencies)
      const figures: PhaseFigures = {
        p50: stats.p50,
        p99: stats.p99,
        failClosed: tally.failClosed,
        dropped,
        exportsTaken: offered.accepted,
        exportsShed: offered.shed,
        cores: [
          (processCpuSeconds(a.pid) - cpu0[0]) / seconds,
          (processCpuSeconds(b.pid) - cpu0[1]) / seconds,
          (await backendCpuSince(db, pg0)) / seconds,
          (client.user + client.system) / 1e6 / seconds
        ]
      }
      await sleep(2000)
      return figures
    }
    const alone = await phase("checks to B alone", [b], false)
    const shared = await phase(`checks to A and B in turn over ${SHARED_RUNS} runs`, [a, b], false, SHARED_RUNS)
    const same = await phase(`checks to A beside ${FACTOR} × exports to A`, [a], true)
    const other = await phase(`checks to B beside ${FACTOR} × exports to A`, [b], true)
    return { root, capacity: taken, alone, same, other, shared }
  } finally {
    await stopAll()
  }
}

const row = (checkout: string, name: string, f: PhaseFigures) => [
  checkout,
  name,
  `${fmtMs(f.p50).replace(" ms", "")} / ${fmtMs(f.p99)}`,
  `${fmtInt(f.failClosed)} / ${fmtInt(f.dropped)}`,
  f.exportsTaken + f.exportsShed === 0 ? "—" : `${fmtInt(f.exportsTaken)} taken, ${fmtInt(f.exportsShed)} shed`,
  f.cores.map((c) => c.toFixed(2)).join(" / ")
]

await runBench(async () => {
  const results: Array<Awaited<ReturnType<typeof runCheckout>>> = []
  for (let round = 0; round < ROUNDS; round++) {
    for (const root of ROOTS) results.push(await runCheckout(root, round))
  }
  const rows = results.flatMap((r) => {
    const name = `${basename(r.root)} (A takes ${fmtInt(r.capacity)} exports/s alone)`
    return [
      row(name, "checks to B, nothing else (ceiling)", r.alone),
      row(name, `checks to A and B in turn, the same ${SHARED_RUNS} runs`, r.shared),
      row(name, `checks to A, ${FACTOR} × exports to A`, r.same),
      row(name, `checks to B, ${FACTOR} × exports to A`, r.other)
    ]
  })
  console.log(
    [
      "",
      `${fmtInt(RATE)} checks/s open loop over ${RUNS} runs (${SHARED_RUNS} in the last phase) × ${SECONDS} s, two instances on one database:`,
      "",
      ...tableLines(
        [
          "checkout",
          "phase",
          "check p50 / p99",
          "fail-closed / dropped",
          "exports",
          "cores: A / B / PostgreSQL / client"
        ],
        rows
      ),
      ""
    ].join("\n")
  )
})
