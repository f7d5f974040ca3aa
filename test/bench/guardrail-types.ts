/**
 * Enforcement checks with a custom guardrail type (the example tool quota of test/extensions/tool-quota) beside the
 * built-in budget type, on one server from the test kit (in-memory PGlite, or a fresh database on TEST_DATABASE_URL):
 * acme has one `budget_usd` guardrail, globex one `tool_quota` guardrail on the tool every check names (a quota so
 * large that every check is allowed and counted: the worst case, the count grows through the run). Round by round,
 * alternately, each arm sends the same checks, CONCURRENCY in flight; latency is the client's, per check. The ceiling
 * beside them is GET /health on the same server in the same rounds (the HTTP round trip with no check at all).
 * Checks answered other than allow (a fail-closed block at the deadline under load) are counted and listed.
 * Knobs: BENCH_GT_ROUNDS (8), BENCH_GT_CHECKS (250 per arm per round), BENCH_GT_CONCURRENCY (4).
 */
import { startServer, type TestServer } from "tapedeck/testing"
import { ToolQuotaLive } from "../extensions/tool-quota/ToolQuota.ts"
import { numberEnv } from "./Harness.ts"

const ROUNDS = numberEnv("BENCH_GT_ROUNDS", 8)
const CHECKS = numberEnv("BENCH_GT_CHECKS", 250)
const CONCURRENCY = numberEnv("BENCH_GT_CONCURRENCY", 4)

// The per-key rate limit off (a 429 is a fast answer, not a check); the deadline as shipped (250 ms).
const server: TestServer = await startServer({
  extensions: [ToolQuotaLive],
  env: { TAPEDECK_RATE_LIMIT_PER_MINUTE: "100000000" }
})

const guardrail = async (key: string, body: unknown) => {
  const r = await server.request("POST", "/api/v1/guardrails", { key, body })
  if (r.status !== 200) throw new Error(`guardrail: ${r.status} ${await r.text()}`)
}
await guardrail(server.keys.acme, { type: "budget_usd", params: { max_usd: 1e9 } })
await guardrail(server.keys.globex, { type: "tool_quota", params: { tool: "web_search", max_per_day: 1_000_000 } })

type Arm = "budget_usd (built-in)" | "tool_quota (custom)" | "GET /health (ceiling)"
const ARMS: ReadonlyArray<Arm> = ["budget_usd (built-in)", "tool_quota (custom)", "GET /health (ceiling)"]
const samples = new Map<Arm, Array<number>>(ARMS.map((a) => [a, []]))
let verdicts = { allow: 0, other: 0 }
const otherReasons = new Map<string, number>()

const one = async (arm: Arm, i: number) => {
  const t0 = performance.now()
  if (arm === "GET /health (ceiling)") {
    const r = await server.request("GET", "/health", { key: null })
    await r.arrayBuffer()
  } else {
    const key = arm === "budget_usd (built-in)" ? server.keys.acme : server.keys.globex
    const r = await server.request("POST", "/api/v1/enforcement/check", {
      key,
      body: { run_id: `bench-run-${i % 16}`, tool_name: "web_search", tool_args_hash: String(i), proposed_usd: 0.001 }
    })
    const decision = (await r.json()) as { verdict?: string; reason?: string; code?: string }
    if (decision.verdict === "allow") verdicts.allow++
    else {
      verdicts.other++
      const said = decision.verdict ? `${decision.verdict}: ${decision.reason}` : `${r.status} ${decision.code}`
      const why = `${arm}: ${said.replace(/\d+/g, "N")}`
      otherReasons.set(why, (otherReasons.get(why) ?? 0) + 1)
    }
  }
  return performance.now() - t0
}

const runArm = async (arm: Arm, round: number, record: boolean) => {
  let next = 0
  const worker = async () => {
    while (next < CHECKS) {
      const i = round * CHECKS + next++
      const ms = await one(arm, i)
      if (record) samples.get(arm)!.push(ms)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
}

try {
  for (const arm of ARMS) await runArm(arm, -1, false) // warm-up
  verdicts = { allow: 0, other: 0 }
  otherReasons.clear()
  for (let round = 0; round < ROUNDS; round++) {
    // Rotate which arm goes first, so drift in the machine's load falls on all of them.
    const order = ARMS.map((_, k) => ARMS[(k + round) % ARMS.length]!)
    for (const arm of order) await runArm(arm, round, true)
  }
} finally {
  await server.stop()
}

const quantile = (sorted: ReadonlyArray<number>, q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
const rows = ARMS.map((arm) => {
  const s = [...samples.get(arm)!].sort((a, b) => a - b)
  return `| ${arm} | ${quantile(s, 0.5).toFixed(2)} ms | ${quantile(s, 0.99).toFixed(2)} ms | ${s.length} |`
})
console.log(`| Arm | p50 | p99 | checks |\n|---|---|---|---|\n${rows.join("\n")}\n`)
console.log(
  `${ROUNDS} rotating rounds × ${CHECKS} requests per arm, ${CONCURRENCY} in flight, one client, ` +
    `${process.env.TEST_DATABASE_URL ? "PostgreSQL" : "in-memory PGlite"}; verdicts of the checks: ` +
    `${verdicts.allow} allow, ${verdicts.other} other (all allow expected). The quota's count reached ` +
    `${(ROUNDS + 1) * CHECKS} allowed checks of its tool by the end (it counts up to the quota at most).`
)
for (const [why, n] of otherReasons) console.log(`  ${n} × ${why}`)
