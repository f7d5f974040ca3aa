/**
 * Slow uploads of one account must not starve another account's ingestion. Run it with
 * `bun test/reliability/slow-upload.ts` (loopback only; about 10 s of baseline plus RELIABILITY_SLOW_SECONDS).
 *
 * The attacker account keeps RELIABILITY_SLOW_UPLOADS connections (default 16, twice the default ingest
 * permits) posting `POST /v1/traces` with `Content-Length: 100000`, the headers and `{"resourceSpans":[`, then:
 * half of them one byte every 1 to 30 s (the trickle), the other half just over the minimum body rate, so that
 * only the deadline ends them (the paced ones). Each reconnects at once when answered. Meanwhile the victim
 * account exports small traces one after the other, as it did alone before the attack.
 *
 * Checked (exit 1 otherwise): every victim export during the attack is a 200 (no extra 503), and its p99 latency
 * stays within 3 × its own p99 before the attack + 50 ms (client-observed, same run); every slow upload is
 * answered 408 `request_timeout` (or 503 `ingest_backpressure`: refused while its account holds its share, or its
 * permit taken back for the victim) with the error body, within the body deadline (10 s by default) + 1 s, and
 * some are answered 408.
 *
 * Knobs: RELIABILITY_DATABASE_URL, RELIABILITY_SLOW_UPLOADS (16), RELIABILITY_SLOW_SECONDS (25).
 */
import net from "node:net"
import { freshDatabase, KEY, latencyStats, log, numberEnv, runBench, sleep, startServer } from "../bench/Harness.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"

if (process.env.RELIABILITY_DATABASE_URL) process.env.BENCH_DATABASE_URL = process.env.RELIABILITY_DATABASE_URL
const SLOW = Math.max(8, Math.floor(numberEnv("RELIABILITY_SLOW_UPLOADS", 16)))
const SECONDS = numberEnv("RELIABILITY_SLOW_SECONDS", 25)
const BASELINE_SECONDS = 8
/** The server's defaults, which this suite leaves unset. */
const DEADLINE_MS = 10_000
const MIN_BYTES_PER_SECOND = 16 * 1024
const ATTACKER_KEY = "svc_reliability_attacker_0002"

interface SlowAnswer {
  readonly kind: "trickle" | "paced"
  readonly status: number | "closed"
  readonly code: string | undefined
  readonly bodyOk: boolean
  readonly elapsedMs: number
}

/** One slow upload until the server answers or closes the connection. */
const slowUpload = (url: string, kind: "trickle" | "paced") =>
  new Promise<SlowAnswer>((resolve) => {
    const { hostname, port } = new URL(url)
    const started = performance.now()
    const socket = net.connect(Number(port), hostname)
    let reply = ""
    let timer: ReturnType<typeof setTimeout> | undefined
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      const status = /^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1]
      let code: string | undefined
      let bodyOk = false
      try {
        const body = JSON.parse(reply.slice(reply.indexOf("\r\n\r\n") + 4))
        code = body.code
        bodyOk = typeof body.error === "string" && typeof body.code === "string" && typeof body.retryable === "boolean"
      } catch {
        // not a JSON body
      }
      socket.destroy()
      resolve({
        kind,
        status: status === undefined ? "closed" : Number(status),
        code,
        bodyOk,
        elapsedMs: performance.now() - started
      })
    }
    socket.on("error", () => {})
    socket.on("data", (d) => {
      reply += d.toString()
      const split = reply.indexOf("\r\n\r\n")
      const length = /content-length: (\d+)/i.exec(reply)?.[1]
      if (split >= 0 && length !== undefined && reply.length - split - 4 >= Number(length)) finish()
    })
    socket.on("close", finish)
    socket.write(
      `POST /v1/traces HTTP/1.1\r\nHost: x\r\nx-service-key: ${ATTACKER_KEY}\r\ncontent-type: application/json\r\n` +
        `content-length: ${kind === "trickle" ? 100_000 : 1_000_000}\r\n\r\n{"resourceSpans":[`
    )
    const send = () => {
      if (done || socket.destroyed) return
      if (kind === "trickle") {
        socket.write(" ")
        timer = setTimeout(send, 1000 + Math.random() * 29_000)
      } else {
        // A quarter over the minimum rate, every 250 ms: kept up with, so only the deadline ends it.
        socket.write(" ".repeat(Math.ceil((MIN_BYTES_PER_SECOND * 1.25) / 4)))
        timer = setTimeout(send, 250)
      }
    }
    timer = setTimeout(send, kind === "trickle" ? 1000 + Math.random() * 29_000 : 0)
  })

/** Small sequential exports of the victim until `until()` is false: latencies and statuses. */
const victim = async (url: string, until: () => boolean) => {
  const latencies: Array<number> = []
  const statuses = new Map<number | string, number>()
  while (until()) {
    const traceHex = hex(16)
    const root = hex(8)
    const spans = Array.from({ length: 10 }, (_, i) =>
      otlpSpan({
        traceId: traceHex,
        spanId: i === 0 ? root : hex(8),
        ...(i === 0 ? {} : { parentSpanId: root }),
        name: `step ${i}`
      })
    )
    const t0 = performance.now()
    let status: number | string
    try {
      const res = await fetch(`${url}/v1/traces`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-service-key": KEY },
        body: JSON.stringify(exportBody(spans, "victim")),
        signal: AbortSignal.timeout(30_000)
      })
      await res.arrayBuffer()
      status = res.status
    } catch (e) {
      status = String(e).slice(0, 60)
    }
    latencies.push(performance.now() - t0)
    statuses.set(status, (statuses.get(status) ?? 0) + 1)
    await sleep(20)
  }
  return { latencies, statuses }
}

const main = async () => {
  const { databaseUrl } = await freshDatabase("tapedeck_slowupload_")
  const server = await startServer(databaseUrl, {
    extraEnv: { TAPEDECK_API_KEYS: `bench=${KEY},attacker=${ATTACKER_KEY}` }
  })

  log(`baseline: the victim alone for ${BASELINE_SECONDS} s`)
  const baselineEnd = performance.now() + BASELINE_SECONDS * 1000
  const baseline = await victim(server.url, () => performance.now() < baselineEnd)

  log(`attack: ${SLOW} slow uploads of another account (half trickling, half paced) for ${SECONDS} s`)
  let attacking = true
  const answers: Array<SlowAnswer> = []
  const attacker = async (kind: "trickle" | "paced") => {
    while (attacking) {
      const answer = await slowUpload(server.url, kind)
      answers.push(answer)
      // A refused upload comes back after a moment (without waiting out Retry-After): the pressure stays on
      // without turning the suite into a benchmark of refusals.
      if (answer.status === 503) await sleep(100)
    }
  }
  const attackers = Array.from({ length: SLOW }, (_, i) => attacker(i % 2 === 0 ? "trickle" : "paced"))
  await sleep(1500) // the uploads hold every permit before the victim comes back
  const attackEnd = performance.now() + SECONDS * 1000
  const during = await victim(server.url, () => performance.now() < attackEnd)
  attacking = false
  log("attack over: waiting for the last slow uploads to be answered")
  await Promise.all(attackers)

  const before = latencyStats(baseline.latencies)
  const under = latencyStats(during.latencies)
  const bound = 3 * before.p99 + 50
  const victimOk = during.statuses.size === 1 && during.statuses.get(200) === during.latencies.length
  const latencyOk = under.p99 <= bound
  const slowBound = DEADLINE_MS + 1000
  const badSlow = answers.filter(
    (a) =>
      !((a.status === 408 && a.code === "request_timeout") || (a.status === 503 && a.code === "ingest_backpressure")) ||
      !a.bodyOk ||
      a.elapsedMs > slowBound
  )
  const count = (kind: string, status: number) => answers.filter((a) => a.kind === kind && a.status === status).length
  const slowest = (kind: string) => Math.max(0, ...answers.filter((a) => a.kind === kind).map((a) => a.elapsedMs))
  const fmtStatuses = (m: Map<number | string, number>) => [...m].map(([s, n]) => `${s}: ${n}`).join(", ")

  console.log(
    [
      "| victim exports (10 spans, sequential) | count | statuses | p50 | p99 | max |",
      "|---|---|---|---|---|---|",
      `| alone, before the attack | ${baseline.latencies.length} | ${fmtStatuses(baseline.statuses)} | ${before.p50.toFixed(1)} ms | ${before.p99.toFixed(1)} ms | ${Math.max(...baseline.latencies).toFixed(1)} ms |`,
      `| during the attack | ${during.latencies.length} | ${fmtStatuses(during.statuses)}${victimOk ? " ✓" : " ✗"} | ${under.p50.toFixed(1)} ms | ${under.p99.toFixed(1)} ms${latencyOk ? " ✓" : " ✗"} | ${Math.max(...during.latencies).toFixed(1)} ms |`,
      "",
      `p99 bound during the attack: 3 × ${before.p99.toFixed(1)} + 50 = ${bound.toFixed(1)} ms`,
      "",
      "| slow uploads (attacker) | answered | 408 | 503 (refused or taken back) | other | slowest answer |",
      "|---|---|---|---|---|---|",
      ...(["trickle", "paced"] as const).map((kind) => {
        const all = answers.filter((a) => a.kind === kind).length
        return `| ${kind} | ${all} | ${count(kind, 408)} | ${count(kind, 503)} | ${all - count(kind, 408) - count(kind, 503)} | ${(slowest(kind) / 1000).toFixed(2)} s${slowest(kind) <= slowBound ? " ✓" : " ✗"} |`
      }),
      "",
      `Shared 2-core machine: the server, PostgreSQL and this script's clients run side by side.`
    ].join("\n")
  )

  const problems: Array<string> = []
  if (!victimOk)
    problems.push(`the victim's exports during the attack were not all 200: ${fmtStatuses(during.statuses)}`)
  if (!latencyOk)
    problems.push(`the victim's p99 during the attack (${under.p99.toFixed(1)} ms) exceeds ${bound.toFixed(1)} ms`)
  if (answers.length < SLOW) problems.push(`only ${answers.length} slow uploads were answered`)
  if (count("trickle", 408) + count("paced", 408) === 0) problems.push("no slow upload was answered 408")
  for (const a of badSlow.slice(0, 10)) {
    problems.push(
      `a ${a.kind} upload was answered ${a.status} (${a.code ?? "no code"}) after ${(a.elapsedMs / 1000).toFixed(2)} s`
    )
  }
  if (problems.length > 0) throw new Error(`slow-upload suite failed:\n- ${problems.join("\n- ")}`)
  log("slow-upload suite passed")
}

await runBench(main)
