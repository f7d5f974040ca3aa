/**
 * Live span stream fan-out benchmark against a real PostgreSQL (run it with `bun test/bench/stream.ts`).
 *
 * 1. Creates a fresh database on BENCH_DATABASE_URL's server and starts the service (`bun src/app/main.ts`) on it as
 *    a separate process (so LISTEN/NOTIFY carries the events, as with several instances).
 * 2. Connects BENCH_SUBSCRIBERS WebSocket subscribers to /ws/v1/stream (one account, no filters), asking for batch
 *    frames (a write batch's events in one frame) unless BENCH_STREAM_BATCH=0.
 * 3. Open loop: every 1/BENCH_REQUESTS_PER_SECOND s a POST /api/v1/traces with BENCH_SPANS_PER_TRACE spans
 *    (~5,000 spans/s by default) for BENCH_SECONDS after BENCH_WARMUP_SECONDS of warm-up.
 * 4. Per subscriber and span event: delivery latency from the moment the write was sent, and from the moment its
 *    200 arrived (the commit as the writer sees it; an event that came first counts 0). Also the writes' own latency
 *    (send → 200), the part of the first figure the stream does not add. Counts every event so
 *    losses show. Samples the server's RSS every 250 ms.
 * 5. Waits (up to 120 s) for the background jobs the writes queued (terminal-trace, search indexing) to drain and
 *    reports how many were pending when the writes ended: the stream's latency is only worth its figure if the work
 *    deferred behind it keeps up.
 * 6. Prints a markdown table; drops the database and stops the server (also on error or Ctrl-C).
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_SUBSCRIBERS, BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_REQUESTS_PER_SECOND,
 * BENCH_SPANS_PER_TRACE, BENCH_STREAM_BATCH, BENCH_CPU_PROF.
 */
import { readFileSync } from "node:fs"
import {
  commandLine,
  connect,
  cpuMeter,
  drainJobs,
  fmtCores,
  fmtInt,
  fmtMs,
  freshDatabase,
  KEY,
  latencyStats,
  log,
  mark,
  numberEnv,
  runBench,
  sleep,
  startServer,
  tableLines
} from "./Harness.ts"

const SUBSCRIBERS = Math.floor(numberEnv("BENCH_SUBSCRIBERS", 100))
const SECONDS = numberEnv("BENCH_SECONDS", 15)
const WARMUP_SECONDS = numberEnv("BENCH_WARMUP_SECONDS", 3)
const REQUESTS_PER_SECOND = numberEnv("BENCH_REQUESTS_PER_SECOND", 100)
const SPANS_PER_TRACE = Math.floor(numberEnv("BENCH_SPANS_PER_TRACE", 50))
/** 1: subscribers ask for batch frames (a write's events in one frame); 0: a frame per event. */
const BATCH = (process.env.BENCH_STREAM_BATCH ?? "1") !== "0"
const TARGET_P99_MS = 100
const MAX_INFLIGHT = 64

const KNOBS = [
  "BENCH_DATABASE_URL", "BENCH_SUBSCRIBERS", "BENCH_SECONDS", "BENCH_WARMUP_SECONDS", "BENCH_REQUESTS_PER_SECOND",
  "BENCH_SPANS_PER_TRACE", "BENCH_STREAM_BATCH", "BENCH_CPU_PROF"
]
const COMMAND = commandLine(KNOBS, "test/bench/stream.ts")
const CPU = cpuMeter("reaped")

const rssMiB = (pid: number) => {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
    return line ? Number(line.replace(/\D+/g, "")) / 1024 : NaN
  } catch {
    return NaN
  }
}

const main = async () => {
  const { database, databaseUrl, pgVersion } = await freshDatabase()
  log(`database ${database}; starting the server`)
  const server = await startServer(databaseUrl)
  const db = await connect(databaseUrl)
  const wsUrl = `${server.url.replace("http", "ws")}/ws/v1/stream`

  // Per trace: when its write was sent and when its 200 arrived; whether it is measured (after the warm-up).
  const sentAt = new Map<string, number>()
  const ackAt = new Map<string, number>()
  const measured = new Set<string>()
  const fromSend: Array<number> = []
  const fromAck: Array<number> = []
  const writeLatencies: Array<number> = []
  let received = 0

  log(`connecting ${SUBSCRIBERS} subscribers`)
  const sockets = await Promise.all(Array.from({ length: SUBSCRIBERS }, async () => {
    const ws = new WebSocket(wsUrl, { headers: { "x-service-key": KEY } } as never)
    let subscribed: () => void = () => {}
    const ready = new Promise<void>((resolve) => (subscribed = resolve))
    // Cheap: only span events are measured, found by their opening (inside strings a quote is escaped, so user
    // data cannot look like one); the trace id follows at a fixed key. A batch frame holds several.
    const spanEvent = (text: string, from: number, now: number) => {
      received++
      const at = text.indexOf('"trace_id":"', from) + 12
      const traceId = text.slice(at, at + 36)
      if (measured.has(traceId)) {
        fromSend.push(now - sentAt.get(traceId)!)
        const ack = ackAt.get(traceId)
        fromAck.push(ack === undefined ? 0 : Math.max(0, now - ack))
      }
    }
    ws.addEventListener("message", (e) => {
      const text = String(e.data)
      const now = performance.now()
      if (text.startsWith('{"type":"batch"')) {
        for (let at = text.indexOf('{"type":"span"'); at >= 0; at = text.indexOf('{"type":"span"', at + 14)) spanEvent(text, at, now)
      } else if (text.startsWith('{"type":"span"')) spanEvent(text, 0, now)
      else if (text.includes('"subscribed"')) subscribed()
    })
    ws.addEventListener("close", (e) => {
      if (e.code !== 1000 && e.code !== 1005) log(`subscriber closed: ${e.code} ${e.reason}`)
    })
    await new Promise((resolve) => ws.addEventListener("open", resolve))
    ws.send(JSON.stringify({ type: "subscribe", ...(BATCH ? { batch: true } : {}) }))
    await ready
    return ws
  }))

  const rssStart = rssMiB(server.pid)
  let rssPeak = rssStart
  const rssTimer = setInterval(() => (rssPeak = Math.max(rssPeak, rssMiB(server.pid))), 250)

  const span = (i: number) => ({
    id: crypto.randomUUID(),
    parent_id: null,
    span_type: i % 3 === 0 ? "tool_call" : "llm_call",
    name: `step-${i}`,
    model: "gpt-4o-mini",
    input: "plan the next step",
    output: "call the search tool",
    input_tokens: 120,
    output_tokens: 30,
    started_at: new Date().toISOString()
  })

  let inflight = 0
  let skipped = 0
  let failed = 0
  let sentMeasured = 0
  const send = async (measure: boolean) => {
    if (inflight >= MAX_INFLIGHT) {
      skipped++
      return
    }
    inflight++
    const id = crypto.randomUUID()
    const body = JSON.stringify({ id, started_at: new Date().toISOString(), name: "bench", spans: Array.from({ length: SPANS_PER_TRACE }, (_, i) => span(i)) })
    if (measure) {
      measured.add(id)
      sentMeasured++
    }
    sentAt.set(id, performance.now())
    try {
      const res = await fetch(`${server.url}/api/v1/traces`, {
        method: "POST",
        headers: { "x-service-key": KEY, "content-type": "application/json" },
        body
      })
      await res.arrayBuffer()
      const acked = performance.now()
      ackAt.set(id, acked)
      if (res.status !== 200) failed++
      else if (measure) writeLatencies.push(acked - sentAt.get(id)!)
    } catch {
      failed++
    } finally {
      inflight--
    }
  }

  const drive = async (seconds: number, measure: boolean) => {
    const interval = 1000 / REQUESTS_PER_SECOND
    const start = performance.now()
    const pending: Array<Promise<void>> = []
    for (let n = 0; ; n++) {
      const due = start + n * interval
      if (due - start >= seconds * 1000) break
      const wait = due - performance.now()
      if (wait > 0) await sleep(wait)
      pending.push(send(measure))
    }
    await Promise.all(pending)
  }

  log(`warm-up ${WARMUP_SECONDS} s`)
  await drive(WARMUP_SECONDS, false)
  const receivedBefore = received
  const cpuBefore = CPU.snapshot(server.pid)
  log(`measuring ${SECONDS} s at ${REQUESTS_PER_SECOND} writes/s × ${SPANS_PER_TRACE} spans to ${SUBSCRIBERS} subscribers`)
  const t0 = performance.now()
  await drive(SECONDS, true)
  const writeSeconds = (performance.now() - t0) / 1000
  // Let the last events arrive.
  const expected = sentMeasured * SPANS_PER_TRACE * SUBSCRIBERS
  for (let i = 0; i < 100 && fromSend.length < expected; i++) await sleep(100)
  const cores = CPU.busy(cpuBefore, CPU.snapshot(server.pid))
  const cpuDrain = CPU.snapshot(server.pid)
  const jobs = await drainJobs(db, 120)
  const drainCores = CPU.busy(cpuDrain, CPU.snapshot(server.pid))
  clearInterval(rssTimer)
  const rssEnd = rssMiB(server.pid)
  for (const ws of sockets) ws.close()

  const s = latencyStats(fromSend)
  const a = latencyStats(fromAck)
  const w = latencyStats(writeLatencies)
  const spansPerSecond = (sentMeasured * SPANS_PER_TRACE) / writeSeconds
  const rows = [
    ["subscribers", `${fmtInt(SUBSCRIBERS)} (${BATCH ? "batch frames" : "a frame per event"})`, "100", ""],
    ["spans written/s (measured phase)", fmtInt(spansPerSecond), "≈ 5,000", `${fmtInt(sentMeasured)} writes, ${failed} failed, ${skipped} not sent (64 in flight)`],
    ["span events delivered/s (all subscribers)", fmtInt((received - receivedBefore) / writeSeconds), "", ""],
    ["events delivered / expected (measured writes)", `${fmtInt(fromSend.length)} / ${fmtInt(expected)}`, "all", mark(fromSend.length === expected)],
    ["delivery latency from the write's send: p50 / p95 / p99", `${fmtMs(s.p50)} / ${fmtMs(s.p95)} / ${fmtMs(s.p99)}`, `p99 ≤ ${TARGET_P99_MS} ms${mark(s.p99 <= TARGET_P99_MS)}`, ""],
    ["delivery latency after the write's 200: p50 / p95 / p99", `${fmtMs(a.p50)} / ${fmtMs(a.p95)} / ${fmtMs(a.p99)}`, "", ""],
    ["the writes themselves (send → 200): p50 / p95 / p99", `${fmtMs(w.p50)} / ${fmtMs(w.p95)} / ${fmtMs(w.p99)}`, "", ""],
    ["background jobs pending when the writes ended → drained in", `${fmtInt(jobs.before)} → ${jobs.left === 0 ? `${jobs.seconds.toFixed(1)} s` : `${fmtInt(jobs.left)} left after ${jobs.seconds.toFixed(0)} s`}`, "", `terminal-trace and search-indexing jobs the writes queued; cores busy while draining: ${fmtCores(drainCores)}`],
    ["server RSS start / peak / end", `${rssStart.toFixed(0)} / ${rssPeak.toFixed(0)} / ${rssEnd.toFixed(0)} MiB`, "", ""],
    ["cores busy: server / postgres / bench client / other", fmtCores(cores), "", ""]
  ]
  console.log([
    "",
    `### Live span stream fan-out (PostgreSQL ${pgVersion})`,
    "",
    ...tableLines(["metric", "value", "target", "note"], rows),
    "",
    `Command: \`${COMMAND}\``,
    ""
  ].join("\n"))
}

await runBench(main)
