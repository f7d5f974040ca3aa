/**
 * Ingest with the example PII redactor (test/extensions/pii-redactor) installed beside the same run without it:
 * two servers from the test kit in this process (in-memory PGlite, or fresh databases on TEST_DATABASE_URL), fed
 * alternately, round by round, the same REST creates and OTLP/HTTP JSON exports. Reports spans/s (the requests'
 * wall time) and this process's CPU time per span (client and server): during the requests alone, and with the arm's
 * background jobs included (each arm's jobs are drained before the next arm's window), and the overheads.
 * Knobs: BENCH_EXT_ROUNDS (6), BENCH_EXT_REQUESTS (20 per path per round), BENCH_EXT_SPANS (20 per request).
 */
import { startServer, type TestServer } from "tapedeck/testing"
import { PiiRedactorLive } from "../extensions/pii-redactor/Redactor.ts"
import { numberEnv } from "./Harness.ts"

const ROUNDS = numberEnv("BENCH_EXT_ROUNDS", 6)
const REQUESTS = numberEnv("BENCH_EXT_REQUESTS", 20)
const SPANS = numberEnv("BENCH_EXT_SPANS", 20)

const text = (i: number) =>
  `user ${i} wrote: please book the flight for jane.doe${i}@example.com, card 4111 1111 1111 ${String(1000 + (i % 9000))}, ` +
  "and remember the itinerary preferences from last time, aisle seat, vegetarian meal, no red-eye connections."

const restBody = (r: number) => {
  const at = new Date().toISOString()
  const root = crypto.randomUUID()
  return {
    id: crypto.randomUUID(),
    name: `bench ${r}`,
    started_at: at,
    status: "completed",
    spans: Array.from({ length: SPANS }, (_, i) => ({
      id: i === 0 ? root : crypto.randomUUID(),
      parent_id: i === 0 ? null : root,
      span_type: "llm_call",
      name: `call ${i}`,
      model: "gpt-4o-mini",
      input: { messages: [{ role: "user", content: text(i) }] },
      output: `done, sk-${"x".repeat(24)}${i}`,
      metadata: { customer: `c${i}@example.org` },
      started_at: at
    }))
  }
}

const hex = (bytes: number) =>
  [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("")

const otlpBody = () => {
  const traceId = hex(16)
  const nanos = `${Date.now()}000000`
  return {
    resourceSpans: [
      {
        resource: { attributes: [{ key: "service.name", value: { stringValue: "bench" } }] },
        scopeSpans: [
          {
            spans: Array.from({ length: SPANS }, (_, i) => ({
              traceId,
              spanId: hex(8),
              name: "chat gpt-4o-mini",
              kind: 3,
              startTimeUnixNano: nanos,
              endTimeUnixNano: nanos,
              attributes: [
                { key: "gen_ai.operation.name", value: { stringValue: "chat" } },
                { key: "gen_ai.request.model", value: { stringValue: "gpt-4o-mini" } },
                { key: "gen_ai.prompt", value: { stringValue: text(i) } },
                { key: "gen_ai.completion", value: { stringValue: `ok sk-${"y".repeat(24)}` } }
              ]
            }))
          }
        ]
      }
    ]
  }
}

type Path = "rest" | "otlp"
const send = async (server: TestServer, path: Path, r: number) => {
  const response =
    path === "rest"
      ? await server.request("POST", "/api/v1/traces", { body: restBody(r) })
      : await server.request("POST", "/v1/traces", { body: otlpBody() })
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${await response.text()}`)
}

/** Waits until the server has no job waiting or running (at most 60 s). */
const drained = async (server: TestServer) => {
  const deadline = performance.now() + 60_000
  while (performance.now() < deadline) {
    const [row] = await server.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM jobs WHERE status IN ('queued', 'running')"
    )
    if ((row?.n ?? 0) === 0) return
    await Bun.sleep(20)
  }
  throw new Error("background jobs did not drain within 60 s")
}

const plain = await startServer()
const redacted = await startServer({ extensions: [PiiRedactorLive] })
const arms = [
  ["without", plain],
  ["with redactor", redacted]
] as const
const totals = new Map<string, { wallMs: number; requestCpuUs: number; cpuUs: number; spans: number }>()

try {
  for (const path of ["rest", "otlp"] as const) {
    for (const [, server] of arms) for (let i = 0; i < 3; i++) await send(server, path, -1) // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which arm goes first, so drift in the machine's load falls on both.
      const order = round % 2 === 0 ? arms : [...arms].reverse()
      for (const [name, server] of order) {
        const cpu0 = process.cpuUsage()
        const t0 = performance.now()
        for (let i = 0; i < REQUESTS; i++) await send(server, path, round)
        const wallMs = performance.now() - t0
        const requestCpu = process.cpuUsage(cpu0)
        // The arm's background jobs (finalising, search indexing) run before the next arm starts and count as its
        // own CPU: otherwise they fall in the other arm's window, which then pays for them.
        await drained(server)
        const cpu = process.cpuUsage(cpu0)
        const key = `${path}|${name}`
        const t = totals.get(key) ?? { wallMs: 0, requestCpuUs: 0, cpuUs: 0, spans: 0 }
        totals.set(key, {
          wallMs: t.wallMs + wallMs,
          requestCpuUs: t.requestCpuUs + requestCpu.user + requestCpu.system,
          cpuUs: t.cpuUs + cpu.user + cpu.system,
          spans: t.spans + REQUESTS * SPANS
        })
      }
    }
  }
} finally {
  await plain.stop()
  await redacted.stop()
}

const rows: Array<string> = []
for (const path of ["rest", "otlp"] as const) {
  const a = totals.get(`${path}|without`)!
  const b = totals.get(`${path}|with redactor`)!
  const rate = (t: typeof a) => (t.spans / t.wallMs) * 1000
  const cpuPerSpan = (t: typeof a) => t.cpuUs / t.spans
  const requestCpuPerSpan = (t: typeof a) => t.requestCpuUs / t.spans
  const overheadRate = (1 - rate(b) / rate(a)) * 100
  const overheadCpu = (cpuPerSpan(b) / cpuPerSpan(a) - 1) * 100
  const overheadRequestCpu = (requestCpuPerSpan(b) / requestCpuPerSpan(a) - 1) * 100
  rows.push(
    `| ${path} spans/s, redactor overhead | ${overheadRate.toFixed(1)} % | ≤ 10 % | ${rate(a).toFixed(0)} → ${rate(b).toFixed(0)} spans/s; ` +
      `CPU during the requests ${requestCpuPerSpan(a).toFixed(0)} → ${requestCpuPerSpan(b).toFixed(0)} µs/span (${overheadRequestCpu.toFixed(1)} %), ` +
      `jobs included ${cpuPerSpan(a).toFixed(0)} → ${cpuPerSpan(b).toFixed(0)} µs/span (${overheadCpu.toFixed(1)} %) |`
  )
}
console.log(`| Figure | Value | Target | Detail |\n|---|---|---|---|\n${rows.join("\n")}\n`)
console.log(
  `${ROUNDS} alternating rounds × ${REQUESTS} requests × ${SPANS} spans per path and arm, one client, ` +
    `${process.env.TEST_DATABASE_URL ? "PostgreSQL" : "in-memory PGlite"}; CPU is this process's (client and both servers).`
)
