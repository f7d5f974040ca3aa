/**
 * CI-gate benchmark against a real PostgreSQL (not a test file: run it with `bun test/bench/gate.ts`).
 *
 * Measures the gate's own overhead with an LLM judge that answers instantly.
 *
 * 1. Creates a fresh database on BENCH_DATABASE_URL's server, starts a fake OpenAI-compatible judge in this process
 *    (test/support/FakeOpenAi.ts: answers `{"score": …, "reason": …}` after BENCH_JUDGE_DELAY_MS, default 0) and the
 *    service (`bun src/app/main.ts`) as a separate process pointed at it.
 * 2. Records BENCH_TRACES (default 50, the most a gate takes) completed traces of BENCH_SPANS spans each (an action root
 *    with llm_call and tool_call children, ~0.5 KB payloads).
 * 3. BENCH_ROUNDS times: creates a new evaluation of BENCH_CRITERIA criteria (so nothing can be reused) and gates all the
 *    traces through POST /api/v1/evaluations/{id}/gate: wall time, judge calls received, most calls in flight at once.
 *    Then gates the same traces again with the last evaluation: every run is reused, no judge call.
 * 4. The floor: the same judge requests (the bodies the fake received in the last cold round) sent from this process
 *    straight to the fake at the server's bound (gate pool × criteria per run, at most 4). Overhead = cold wall − floor.
 *    Then one judge-bound gate (each answer after BENCH_SLOW_JUDGE_MS, default 20): the calls in flight at once show
 *    the pool's bound, and its wall time is compared with the ideal ⌈calls / bound⌉ × delay.
 * 5. Checks every answer: 200, passed, one completed run per trace, exactly traces × criteria judge calls.
 * 6. Prints a markdown table; drops the database, stops the server and the fake (also on error or Ctrl-C).
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_TRACES, BENCH_SPANS, BENCH_CRITERIA, BENCH_ROUNDS, BENCH_JUDGE_DELAY_MS, BENCH_SLOW_JUDGE_MS,
 * BENCH_GATE_CONCURRENCY (the server's TAPEDECK_EVAL_GATE_CONCURRENCY, default 8).
 */
import { startFakeOpenAi } from "../support/FakeOpenAi.ts"
import {
  commandLine,
  filler,
  fmtInt,
  fmtMs,
  freshDatabase,
  KEY,
  latencyStats,
  log,
  mark,
  numberEnv,
  onCleanup,
  runBench,
  startServer,
  SYSTEM_PROMPT,
  tableLines
} from "./Harness.ts"

const TRACES = Math.floor(numberEnv("BENCH_TRACES", 50))
const SPANS = Math.max(2, Math.floor(numberEnv("BENCH_SPANS", 5)))
const CRITERIA = Math.floor(numberEnv("BENCH_CRITERIA", 3))
const ROUNDS = Math.floor(numberEnv("BENCH_ROUNDS", 5))
const JUDGE_DELAY_MS = Number(process.env.BENCH_JUDGE_DELAY_MS ?? "0") || 0
/** A second, judge-bound pass: each answer takes this long, so the calls in flight show the concurrency bound. */
const SLOW_JUDGE_MS = numberEnv("BENCH_SLOW_JUDGE_MS", 20)
const GATE_CONCURRENCY = Math.floor(numberEnv("BENCH_GATE_CONCURRENCY", 8))
const TARGET_OVERHEAD_MS = 1000

if (TRACES > 50) throw new Error("BENCH_TRACES must be at most 50 (the gate's limit)")
if (CRITERIA > 10) throw new Error("BENCH_CRITERIA must be at most 10")

const AUTH = { "x-service-key": KEY, "content-type": "application/json" }

const post = async (url: string, body: unknown) => {
  const response = await fetch(url, { method: "POST", headers: AUTH, body: JSON.stringify(body) })
  const text = await response.text()
  if (response.status !== 200) throw new Error(`POST ${url}: HTTP ${response.status}: ${text.slice(0, 500)}`)
  return JSON.parse(text)
}

const traceBody = (i: number) => {
  const root = { id: crypto.randomUUID(), parent_id: null, span_type: "action", name: "agent", started_at: "2026-01-01T00:00:00.000Z", ended_at: "2026-01-01T00:00:09.000Z" }
  const children = Array.from({ length: SPANS - 1 }, (_, j) => {
    const llm = j % 2 === 0
    return {
      id: crypto.randomUUID(),
      parent_id: root.id,
      span_type: llm ? "llm_call" : "tool_call",
      name: llm ? "plan" : "search",
      ...(llm ? { model: "gpt-4o-mini", input: [{ role: "system", content: SYSTEM_PROMPT }, { role: "user", content: filler(200) }] } : { input: { query: filler(80) } }),
      output: filler(300),
      started_at: `2026-01-01T00:00:0${Math.min(8, j + 1)}.000Z`,
      duration_ms: 500
    }
  })
  return {
    id: crypto.randomUUID(),
    name: `bench trace ${i}`,
    status: "completed",
    started_at: "2026-01-01T00:00:00.000Z",
    ended_at: "2026-01-01T00:00:09.000Z",
    input: filler(300),
    output: filler(400),
    spans: [root, ...children]
  }
}

await runBench(async () => {
  let inFlight = 0
  let mostInFlight = 0
  let delayMs = JUDGE_DELAY_MS
  const fake = startFakeOpenAi(async () => {
    mostInFlight = Math.max(mostInFlight, ++inFlight)
    try {
      if (delayMs > 0) await Bun.sleep(delayMs)
      return { content: JSON.stringify({ score: 0.9, reason: "meets the criterion" }), usage: { prompt_tokens: 900, completion_tokens: 20 } }
    } finally {
      inFlight--
    }
  })
  onCleanup(() => fake.stop())

  const db = await freshDatabase("tapedeck_bench_gate_")
  log(`database ${db.database} (PostgreSQL ${db.pgVersion})`)
  const server = await startServer(db.databaseUrl, {
    extraEnv: {
      TAPEDECK_LLM_BASE_URL: fake.baseUrl,
      TAPEDECK_LLM_API_KEY: "sk-bench",
      TAPEDECK_EVAL_GATE_CONCURRENCY: String(GATE_CONCURRENCY),
      TAPEDECK_JOB_POLL_MS: "1000"
    }
  })
  log(`server on ${server.url}`)

  const traceIds: Array<string> = []
  for (let i = 0; i < TRACES; i++) traceIds.push((await post(`${server.url}/api/v1/traces`, traceBody(i))).id)
  log(`${TRACES} traces of ${SPANS} spans recorded`)

  const criteria = Array.from({ length: CRITERIA }, (_, i) => ({
    name: `criterion ${i}`,
    description: `The agent ${["answers correctly", "cites its sources", "stays polite", "uses few steps", "avoids loops"][i % 5]}.`,
    weight: 1 + (i % 3)
  }))

  const gate = async (evaluationId: string) => {
    const before = fake.requests.length
    mostInFlight = 0
    const t0 = performance.now()
    const result = await post(`${server.url}/api/v1/evaluations/${evaluationId}/gate`, { trace_ids: traceIds, threshold: 0.5 })
    const ms = performance.now() - t0
    return { result, ms, calls: fake.requests.length - before, most: mostInFlight, firstRequest: before }
  }

  // A warm-up round, not counted (JIT, connection pools).
  const warm = await post(`${server.url}/api/v1/evaluations`, { name: "warm-up", criteria })
  await gate(warm.id)

  const cold: Array<Awaited<ReturnType<typeof gate>>> = []
  let lastEvaluation = ""
  for (let round = 0; round < ROUNDS; round++) {
    const evaluation = await post(`${server.url}/api/v1/evaluations`, { name: `bench ${round}`, criteria })
    lastEvaluation = evaluation.id
    const run = await gate(evaluation.id)
    const ok = run.result.passed === true && run.result.runs.length === TRACES &&
      run.result.runs.every((r: any) => r.status === "completed" && r.reused === false) && run.calls === TRACES * CRITERIA
    if (!ok) throw new Error(`round ${round}: unexpected gate answer (${run.calls} calls): ${JSON.stringify(run.result).slice(0, 800)}`)
    cold.push(run)
    log(`round ${round + 1}/${ROUNDS}: ${fmtMs(run.ms)}, ${run.calls} judge calls`)
  }

  const reused = await gate(lastEvaluation)
  if (reused.calls !== 0 || !reused.result.runs.every((r: any) => r.reused === true)) {
    throw new Error(`the reused gate asked the judge ${reused.calls} times`)
  }

  // The floor: the last cold round's judge requests, sent from here straight to the fake at the same concurrency.
  const last = cold.at(-1)!
  const bodies = fake.requests.slice(last.firstRequest, last.firstRequest + last.calls).map((r) => JSON.stringify(r.body))
  const bound = GATE_CONCURRENCY * Math.min(4, CRITERIA)
  const floorConcurrency = bound
  const floorT0 = performance.now()
  let next = 0
  await Promise.all(Array.from({ length: floorConcurrency }, async () => {
    while (next < bodies.length) {
      const body = bodies[next++]!
      const response = await fetch(`${fake.baseUrl}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body })
      await response.arrayBuffer()
    }
  }))
  const floorMs = performance.now() - floorT0

  // Judge-bound: every answer takes SLOW_JUDGE_MS, so the gate's pool fills up to its bound.
  delayMs = SLOW_JUDGE_MS
  const slowEvaluation = await post(`${server.url}/api/v1/evaluations`, { name: "slow judge", criteria })
  const slow = await gate(slowEvaluation.id)
  delayMs = JUDGE_DELAY_MS
  const slowIdealMs = Math.ceil((TRACES * CRITERIA) / bound) * SLOW_JUDGE_MS

  const wall = latencyStats(cold.map((c) => c.ms))
  const overhead = wall.p50 - floorMs
  const promptChars = latencyStats(bodies.map((b) => b.length))
  const lines = [
    "",
    `Gate over ${TRACES} traces × ${CRITERIA} criteria (${SPANS} spans each), judge answering after ${JUDGE_DELAY_MS} ms, ` +
    `TAPEDECK_EVAL_GATE_CONCURRENCY=${GATE_CONCURRENCY}, ${ROUNDS} rounds, PostgreSQL ${db.pgVersion}`,
    "",
    ...tableLines(["metric", "value", "target"], [
      ["cold gate wall time p50 / max", `${fmtMs(wall.p50)} / ${fmtMs(Math.max(...cold.map((c) => c.ms)))}`, "—"],
      ["judge calls per cold gate", fmtInt(last.calls), `${TRACES * CRITERIA} (traces × criteria)`],
      [`floor: the same judge calls sent directly to the fake (concurrency ${floorConcurrency})`, fmtMs(floorMs), "—"],
      ["our overhead (cold p50 − floor)", fmtMs(overhead), `≤ ${TARGET_OVERHEAD_MS} ms${mark(overhead <= TARGET_OVERHEAD_MS)}`],
      ["overhead per trace", fmtMs(overhead / TRACES), "—"],
      ["judge prompt size p50", `${fmtInt(promptChars.p50)} chars`, "—"],
      ["warm gate (all runs reused, 0 judge calls)", fmtMs(reused.ms), "—"],
      [`judge-bound gate (${SLOW_JUDGE_MS} ms per answer): wall time`, fmtMs(slow.ms), `ideal at the bound: ${fmtMs(slowIdealMs)}`],
      [`judge-bound gate: most judge calls in flight`, fmtInt(slow.most), `≤ ${bound} (gate pool × criteria)${mark(slow.most <= bound)}`]
    ]),
    "",
    `reproduce: ${commandLine(["BENCH_DATABASE_URL", "BENCH_TRACES", "BENCH_SPANS", "BENCH_CRITERIA", "BENCH_ROUNDS", "BENCH_JUDGE_DELAY_MS", "BENCH_SLOW_JUDGE_MS", "BENCH_GATE_CONCURRENCY"], "test/bench/gate.ts")}`
  ]
  console.log(lines.join("\n"))
})
