/**
 * Overload: OTLP exporters far past the ingest capacity (RELIABILITY_OVERLOAD_CLIENTS in flight, each re-sending at
 * once after a 503, no backoff) for RELIABILITY_OVERLOAD_SECONDS (default 60; RELIABILITY_LONG=1 → 300), while a
 * prober in its own thread (overload-prober.ts) calls /health and the enforcement check every 100 ms. Run it with `bun test/reliability/overload.ts`.
 *
 * Checked (exit 1 otherwise): every refusal is a 503 `ingest_backpressure` with Retry-After ≥ 1 and `retryable`,
 * nothing else fails; every accepted export is stored; server RSS stays flat (peak ≤ 1.5 × the peak of the first
 * 10 s, reported each 5 s); /health and enforcement keep answering 200. Their latency is reported against targets
 * (/health p99 ≤ 100 ms, enforcement p99 ≤ 5 ms) and marked, not enforced: this machine's 2 cores are shared by
 * the load, the server and PostgreSQL. Beside them, the same probes of a ceiling under the same load: a bare
 * Bun.serve in its own process, whose check runs one `SELECT 1` (CEILING_SCRIPT).
 */
import { accountNamespace, traceUuid } from "#layers/ingest/OtlpIds"
import {
  connect,
  freshDatabase,
  KEY,
  latencyStats,
  log,
  numberEnv,
  runBench,
  sleep,
  startBareServer,
  startServer
} from "../bench/Harness.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"

if (process.env.RELIABILITY_DATABASE_URL) process.env.BENCH_DATABASE_URL = process.env.RELIABILITY_DATABASE_URL
const SECONDS = numberEnv("RELIABILITY_OVERLOAD_SECONDS", process.env.RELIABILITY_LONG ? 300 : 60)
const CLIENTS = Math.floor(numberEnv("RELIABILITY_OVERLOAD_CLIENTS", 64))
const SPANS = 100
const headers = { "content-type": "application/json", "x-service-key": KEY }

/**
 * The ceiling the probes are set beside, in its own process under the same load: a bare Bun.serve answering /health
 * with a constant, and the check's path with one `SELECT 1` on the same PostgreSQL (the least any check can cost).
 */
const CEILING_SCRIPT = `
const pg = require("pg")
const pool = new pg.Pool({ connectionString: process.env.CEILING_DATABASE_URL, max: 2 })
pool.on("error", () => {})
const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    if (new URL(req.url).pathname === "/health") return Response.json({ status: "ok" })
    await req.text()
    await pool.query("SELECT 1")
    return Response.json({ verdict: "allow" })
  }
})
console.log("PORT " + server.port)
`

const rssMb = (pid: number) => {
  const status = require("node:fs").readFileSync(`/proc/${pid}/status`, "utf8") as string
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024
}

interface Probes {
  readonly health: Array<number>
  readonly enforcement: Array<number>
  readonly ceilingHealth: Array<number>
  readonly ceilingEnforcement: Array<number>
  readonly failures: number
}

const main = async () => {
  const { databaseUrl } = await freshDatabase("tapedeck_overload_")
  const db = await connect(databaseUrl)
  const server = await startServer(databaseUrl)
  const problems: Array<string> = []
  let running = true
  let accepted = 0
  let refused = 0
  const acceptedTraces: Array<string> = []
  const bad: Array<string> = []

  const exporter = async () => {
    while (running) {
      const traceHex = hex(16)
      const root = hex(8)
      const spans = Array.from({ length: SPANS }, (_, i) =>
        otlpSpan({
          traceId: traceHex,
          spanId: i === 0 ? root : hex(8),
          ...(i === 0 ? {} : { parentSpanId: root }),
          name: `op ${i}`
        })
      )
      const body = JSON.stringify(exportBody(spans, "overload"))
      try {
        const res = await fetch(`${server.url}/v1/traces`, { method: "POST", headers, body })
        const text = await res.text()
        if (res.status === 200) {
          accepted++
          acceptedTraces.push(traceHex)
        } else if (res.status === 503) {
          refused++
          const b = JSON.parse(text)
          if (
            b.code !== "ingest_backpressure" ||
            b.retryable !== true ||
            !(Number(res.headers.get("retry-after")) >= 1)
          ) {
            bad.push(`503 without the backpressure body or Retry-After: ${text.slice(0, 100)}`)
          }
        } else bad.push(`${res.status}: ${text.slice(0, 100)}`)
      } catch (e) {
        bad.push(String(e))
      }
    }
  }

  // The prober runs in its own thread: timed here, the exporters' body building would delay its own callbacks.
  const prober = new Worker(new URL("./overload-prober.ts", import.meta.url).href)
  const probes = new Promise<Probes>((resolve) => {
    prober.onmessage = (event) => resolve(event.data)
  })
  const ceiling = await startBareServer(CEILING_SCRIPT, { CEILING_DATABASE_URL: databaseUrl })
  prober.postMessage({ url: server.url, key: KEY, ceilingUrl: ceiling.url })

  const rss: Array<number> = []
  const sampler = (async () => {
    while (running) {
      rss.push(rssMb(server.pid))
      await sleep(1000)
    }
  })()

  log(`overload: ${CLIENTS} exporters of ${SPANS}-span exports for ${SECONDS} s`)
  const t0 = performance.now()
  const work = Array.from({ length: CLIENTS }, exporter)
  await sleep(SECONDS * 1000)
  running = false
  prober.postMessage("stop")
  const [{ ceilingEnforcement, ceilingHealth, enforcement, failures: probeFailures, health }] = await Promise.all([
    probes,
    ...work,
    sampler
  ])
  prober.terminate()
  await ceiling.stop()
  const elapsed = (performance.now() - t0) / 1000

  const account = (await db.query<{ id: string }>("SELECT id FROM accounts WHERE name = 'bench'")).rows[0]!.id
  const ns = accountNamespace(account)
  const ids = acceptedTraces.map((h) => traceUuid(ns, h))
  const stored = Number(
    (await db.query<{ n: string }>("SELECT count(*) AS n FROM spans WHERE trace_id = ANY($1::uuid[])", [ids])).rows[0]!
      .n
  )

  const early = Math.max(...rss.slice(0, 10))
  const peak = Math.max(...rss)
  const h = latencyStats(health)
  const e = latencyStats(enforcement)
  const ch = latencyStats(ceilingHealth)
  const ce = latencyStats(ceilingEnforcement)
  if (bad.length > 0) problems.push(`${bad.length} answers other than 200 or a proper 503, e.g. ${bad[0]}`)
  if (stored !== accepted * SPANS) problems.push(`${accepted * SPANS - stored} spans of accepted exports missing`)
  if (peak > early * 1.5)
    problems.push(`RSS grew from ${early.toFixed(0)} MB (first 10 s peak) to ${peak.toFixed(0)} MB`)
  if (probeFailures > 0) problems.push(`${probeFailures} /health or enforcement calls failed`)
  if (accepted === 0 || refused === 0) problems.push(`not an overload: ${accepted} accepted, ${refused} refused`)

  console.log(
    [
      "| overload | value | target | ceiling (bare Bun.serve; the check: one `SELECT 1`) |",
      "|---|---|---|---|",
      `| exporters in flight / duration | ${CLIENTS} / ${elapsed.toFixed(0)} s | — | — |`,
      `| exports accepted / refused 503 | ${accepted} (${Math.round((accepted * SPANS) / elapsed)} spans/s) / ${refused} | — | — |`,
      `| refusals with Retry-After and the backpressure body | ${refused - bad.filter((b) => b.startsWith("503")).length} / ${refused} | all | — |`,
      `| accepted spans stored | ${stored} / ${accepted * SPANS} | all | — |`,
      `| server RSS first 10 s peak / overall peak / end | ${early.toFixed(0)} / ${peak.toFixed(0)} / ${rss.at(-1)!.toFixed(0)} MB | peak ≤ 1.5 × early | — |`,
      `| RSS every 5 s | ${rss
        .filter((_, i) => i % 5 === 0)
        .map((r) => r.toFixed(0))
        .join(" ")} | — | — |`,
      `| /health p50 / p99 | ${h.p50.toFixed(1)} / ${h.p99.toFixed(1)} ms | p99 ≤ 100 ms${h.p99 <= 100 ? " ✓" : " ✗"} | ${ch.p50.toFixed(1)} / ${ch.p99.toFixed(1)} ms |`,
      `| enforcement check p50 / p99 | ${e.p50.toFixed(1)} / ${e.p99.toFixed(1)} ms | p99 ≤ 5 ms${e.p99 <= 5 ? " ✓" : " ✗"} | ${ce.p50.toFixed(1)} / ${ce.p99.toFixed(1)} ms |`
    ].join("\n")
  )
  if (problems.length > 0) throw new Error(`overload suite failed:\n- ${problems.join("\n- ")}`)
  log("overload suite passed")
}

await runBench(main)
