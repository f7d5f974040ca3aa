/**
 * The service's CPU per enforcement check, A/B between checkouts (not a test file: run it with
 * `bun test/bench/enforcement-cpu.ts`). CPU per check moves much less than checks/s when the machine is shared, so
 * it is the figure to decide a hot-path change by.
 *
 * 1. For each checkout in BENCH_AB_ROOTS (comma-separated directories, default this one; e.g. a detached worktree of
 *    another branch with node_modules symlinked), creates a fresh database on BENCH_DATABASE_URL's server, starts that
 *    checkout's service (`bun src/app/main.ts`) on it as a separate process and creates the 20 account-wide policies
 *    of test/bench/enforcement.ts.
 * 2. Warm-up: BENCH_AB_WARMUP checks per service at concurrency 8.
 * 3. BENCH_AB_ROUNDS rounds; in each, every service in turn (A, B, A, B, ...) gets BENCH_AB_CHECKS checks in a closed
 *    loop at BENCH_CONCURRENCY, over 1,000 runs, the same check bodies as test/bench/enforcement.ts. The server
 *    process's user + system CPU (from /proc/<pid>/stat) before and after, divided by the checks, is its CPU per check.
 * 4. Verifies every check answered 200 with the expected verdict; prints per-round and median µs per check.
 *
 * TAPEDECK_* settings given to this script are passed to every server.
 */
import { basename } from "node:path"
import { CheckSource, createPolicies } from "./EnforcementLoad.ts"
import {
  abRoots,
  fmtInt,
  freshDatabase,
  KEY,
  loadAverages,
  log,
  median,
  numberEnv,
  processCpuSeconds,
  runBench,
  type Server,
  sleep,
  startServer,
  tableLines
} from "./Harness.ts"

const ROOTS = abRoots()
const CHECKS = Math.floor(numberEnv("BENCH_AB_CHECKS", 5000))
const WARMUP = Math.floor(numberEnv("BENCH_AB_WARMUP", 3000))
const ROUNDS = Math.floor(numberEnv("BENCH_AB_ROUNDS", 4))
const CONCURRENCY = Math.floor(numberEnv("BENCH_CONCURRENCY", 32))

interface Subject {
  readonly label: string
  readonly server: Server
  readonly denyPolicyId: string
  readonly source: CheckSource
  phase: number
  readonly cpuPerCheck: Array<number>
  readonly rates: Array<number>
}

/** `count` checks in a closed loop at `concurrency`; throws on any answer but 200 with the expected verdict. */
const run = async (subject: Subject, count: number, concurrency: number) => {
  subject.phase++
  let left = count
  const worker = async () => {
    while (left > 0) {
      left--
      const check = subject.source.next(subject.phase)
      const res = await fetch(`${subject.server.url}/api/v1/enforcement/check`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-service-key": KEY },
        body: check.body
      })
      const text = await res.text()
      if (res.status !== 200) throw new Error(`${subject.label}: check answered HTTP ${res.status}: ${text}`)
      const decision = JSON.parse(text) as { verdict?: unknown; policy_id?: unknown }
      const ok =
        decision.verdict === check.expected &&
        (check.expected === "allow" || decision.policy_id === subject.denyPolicyId)
      if (!ok) throw new Error(`${subject.label}: ${check.body} answered ${text}`)
    }
  }
  const cpu0 = processCpuSeconds(subject.server.pid)
  const t0 = performance.now()
  await Promise.all(Array.from({ length: concurrency }, worker))
  const seconds = (performance.now() - t0) / 1000
  const cpu = processCpuSeconds(subject.server.pid) - cpu0
  return { cpuPerCheckUs: (cpu / count) * 1e6, rate: count / seconds }
}

const main = async () => {
  const subjects: Array<Subject> = []
  for (const [i, root] of ROOTS.entries()) {
    const { databaseUrl } = await freshDatabase()
    const label = `${String.fromCharCode(65 + i)} (${basename(root)})`
    log(`${label}: starting the service from ${root}`)
    const server = await startServer(databaseUrl, { root })
    const denyPolicyId = await createPolicies(server.url)
    const source = new CheckSource(1000, `cpu${i}`)
    subjects.push({ label, server, denyPolicyId, source, phase: 0, cpuPerCheck: [], rates: [] })
  }
  for (const s of subjects) {
    log(`${s.label}: warm-up, ${fmtInt(WARMUP)} checks at concurrency 8`)
    await run(s, WARMUP, 8)
  }
  for (let round = 1; round <= ROUNDS; round++) {
    for (const s of subjects) {
      await sleep(300)
      const r = await run(s, CHECKS, CONCURRENCY)
      s.cpuPerCheck.push(r.cpuPerCheckUs)
      s.rates.push(r.rate)
      log(`round ${round}, ${s.label}: ${r.cpuPerCheckUs.toFixed(1)} µs CPU per check, ${fmtInt(r.rate)} checks/s`)
    }
  }
  const load = loadAverages()
  console.log(
    [
      "",
      ...tableLines(
        [
          "service",
          ...Array.from({ length: ROUNDS }, (_, i) => `round ${i + 1}`),
          "median µs/check",
          "median checks/s"
        ],
        subjects.map((s) => [
          s.label,
          ...s.cpuPerCheck.map((x) => x.toFixed(1)),
          median(s.cpuPerCheck).toFixed(1),
          fmtInt(median(s.rates))
        ])
      ),
      "",
      `- Server process CPU (user + system, /proc/<pid>/stat) per check: closed loop at concurrency ${CONCURRENCY}, ${fmtInt(CHECKS)} checks a round over 1,000 runs, 20 account-wide policies, services alternating, after ${fmtInt(WARMUP)} warm-up checks each. Load average at the end ${load.one} (1 min) / ${load.five} (5 min).`
    ].join("\n")
  )
}

await runBench(main)
