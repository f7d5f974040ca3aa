/**
 * Database outage: the API reaches PostgreSQL through a loopback proxy; under steady REST, OTLP and enforcement
 * load the proxy drops every connection and refuses new ones for RELIABILITY_OUTAGE_SECONDS (default 10), then
 * lets them through again. Run it with `bun test/reliability/outage.ts`.
 *
 * Checked: during the outage every answer comes within the deadline (TAPEDECK_DB_CONNECT_TIMEOUT_MS plus a margin)
 * and is a 503 `{code: "unavailable", retryable: true}` with Retry-After for REST and OTLP, and a 200 block for
 * enforcement (fail closed); never a 500, never a hang; /health keeps answering; after the outage the same instance
 * recovers by itself (no restart) and every span acknowledged before, during or after is stored.
 *
 * Knobs: RELIABILITY_DATABASE_URL, RELIABILITY_OUTAGE_SECONDS, RELIABILITY_WORKERS (clients per kind, default 2).
 */
import { connect, freshDatabase, KEY, log, numberEnv, runBench, sleep, startServer } from "../bench/Harness.ts"
import { startTcpProxy } from "../support/TcpProxy.ts"

if (process.env.RELIABILITY_DATABASE_URL) process.env.BENCH_DATABASE_URL = process.env.RELIABILITY_DATABASE_URL
const OUTAGE_SECONDS = numberEnv("RELIABILITY_OUTAGE_SECONDS", 10)
const WORKERS = Math.floor(numberEnv("RELIABILITY_WORKERS", 2))
const CONNECT_TIMEOUT_MS = 2000
/** The promised deadline: the connect timeout, plus time for the answer itself on a loaded 2-core machine. */
const DEADLINE_MS = CONNECT_TIMEOUT_MS + 1500
const headers = { "content-type": "application/json", "x-service-key": KEY }

type Phase = "before" | "outage" | "after"
interface Answer {
  readonly kind: string
  /** The phase when the request was sent, and when its answer arrived. */
  readonly phase: Phase
  readonly answeredIn: Phase
  readonly status: number
  readonly ms: number
  readonly body: any
  readonly retryAfter: string | null
}

const traceBody = () => {
  const id = crypto.randomUUID()
  const spans = Array.from({ length: 5 }, () => ({
    id: crypto.randomUUID(),
    parent_id: null,
    span_type: "llm_call",
    name: "step",
    started_at: "2026-11-01T00:00:00.000Z"
  }))
  return {
    id,
    spans: spans.map((s) => s.id),
    body: JSON.stringify({ id, name: "outage", started_at: "2026-11-01T00:00:00.000Z", spans })
  }
}

const main = async () => {
  const { databaseUrl } = await freshDatabase("tapedeck_outage_")
  const db = await connect(databaseUrl)
  const target = new URL(databaseUrl)
  const proxy = await startTcpProxy({ hostname: target.hostname, port: Number(target.port || 5432) })
  const viaProxy = new URL(databaseUrl)
  viaProxy.port = String(proxy.port)
  const server = await startServer(viaProxy.toString(), {
    extraEnv: { TAPEDECK_DB_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS), TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "500" }
  })

  let phase: Phase = "before"
  let stopped = false
  const answers: Array<Answer> = []
  const acknowledged = new Map<string, ReadonlyArray<string>>()
  const send = async (kind: string, path: string, init: RequestInit) => {
    const at = phase
    const t0 = performance.now()
    try {
      const res = await fetch(`${server.url}${path}`, { ...init, signal: AbortSignal.timeout(30_000) })
      const text = await res.text()
      let body: any = text
      try {
        body = JSON.parse(text)
      } catch {
        // kept as text
      }
      const answer = {
        kind,
        phase: at,
        answeredIn: phase,
        status: res.status,
        ms: performance.now() - t0,
        body,
        retryAfter: res.headers.get("retry-after")
      }
      answers.push(answer)
      return answer
    } catch (e) {
      const answer = {
        kind,
        phase: at,
        answeredIn: phase,
        status: 0,
        ms: performance.now() - t0,
        body: String(e),
        retryAfter: null
      }
      answers.push(answer)
      return answer
    }
  }
  const loop = async (step: () => Promise<void>) => {
    while (!stopped) {
      await step()
      await sleep(25)
    }
  }
  const clients = [
    ...Array.from({ length: WORKERS }, () =>
      loop(async () => {
        const t = traceBody()
        const a = await send("rest", "/api/v1/traces", { method: "POST", headers, body: t.body })
        if (a.status === 200) acknowledged.set(t.id, t.spans)
      })
    ),
    ...Array.from({ length: WORKERS }, () =>
      loop(async () => {
        await send("list", "/api/v1/traces?limit=5", { headers })
      })
    ),
    ...Array.from({ length: WORKERS }, () =>
      loop(async () => {
        await send("enforcement", "/api/v1/enforcement/check", {
          method: "POST",
          headers,
          body: JSON.stringify({
            run_id: `run-${Math.floor(Math.random() * 50)}`,
            tool_name: "search",
            proposed_usd: 0.001
          })
        })
      })
    ),
    loop(async () => {
      await send("health", "/health", {})
    })
  ]

  await sleep(3000)
  phase = "outage"
  log(`outage: the proxy drops and refuses every database connection for ${OUTAGE_SECONDS} s`)
  proxy.cut()
  await sleep(OUTAGE_SECONDS * 1000)
  proxy.restore()
  phase = "after"
  const restoredAt = performance.now()
  log("database reachable again")
  let recoveredMs = NaN
  while (performance.now() - restoredAt < 30_000) {
    const probe = await send("probe", "/api/v1/traces?limit=1", { headers })
    if (probe.status === 200) {
      recoveredMs = performance.now() - restoredAt
      break
    }
    await sleep(100)
  }
  await sleep(3000)
  stopped = true
  await Promise.all(clients)

  const problems: Array<string> = []
  const during = answers.filter((a) => a.phase === "outage")
  const byKind = (kind: string, list = during) => list.filter((a) => a.kind === kind)
  const slow = during.filter((a) => a.ms > DEADLINE_MS)
  if (slow.length > 0)
    problems.push(
      `${slow.length} answers during the outage took longer than ${DEADLINE_MS} ms (max ${Math.max(...slow.map((a) => a.ms)).toFixed(0)} ms)`
    )
  const serverErrors = answers.filter((a) => a.status === 500 || a.status === 0)
  if (serverErrors.length > 0)
    problems.push(`${serverErrors.length} answers were 500 or no answer, e.g. ${JSON.stringify(serverErrors[0])}`)
  for (const kind of ["rest", "list"]) {
    const bad = byKind(kind).filter(
      (a) =>
        a.status !== 200 &&
        !(a.status === 503 && a.body?.code === "unavailable" && a.body?.retryable === true && Number(a.retryAfter) >= 1)
    )
    if (bad.length > 0)
      problems.push(
        `${bad.length} ${kind} answers during the outage were neither 200 nor a retryable 503: ${JSON.stringify(bad[0])}`
      )
  }
  const enforcement = byKind("enforcement")
  const notClosed = enforcement.filter(
    (a) => a.status !== 200 || (a.body?.verdict !== "block" && a.body?.verdict !== "allow")
  )
  if (notClosed.length > 0)
    problems.push(
      `${notClosed.length} enforcement answers during the outage were not a verdict: ${JSON.stringify(notClosed[0])}`
    )
  // Checks sent and answered while the connections were cut cannot have read the run's state: each must block.
  // (One sent in the outage's last moments may reach the database once it is back, and rightly be allowed.)
  const allowed = enforcement.filter((a) => a.body?.verdict === "allow" && a.answeredIn === "outage")
  if (allowed.length > 0) problems.push(`${allowed.length} enforcement checks allowed during the outage`)
  const healthBad = byKind("health").filter((a) => a.status !== 200)
  if (healthBad.length > 0) problems.push(`/health failed ${healthBad.length} times during the outage`)
  if (!Number.isFinite(recoveredMs)) problems.push("the API did not recover within 30 s of the database coming back")
  const afterRest = byKind(
    "rest",
    answers.filter((a) => a.phase === "after")
  )
  if (afterRest.length === 0 || afterRest.at(-1)!.status !== 200)
    problems.push("REST writes did not succeed again after the outage")

  const ids = [...acknowledged.values()].flat()
  const stored = Number(
    (await db.query<{ n: string }>("SELECT count(*) AS n FROM spans WHERE id = ANY($1::uuid[])", [ids])).rows[0]!.n
  )
  if (stored !== ids.length) problems.push(`${ids.length - stored} acknowledged spans missing`)

  const count = (list: ReadonlyArray<Answer>, pred: (a: Answer) => boolean) => list.filter(pred).length
  const max = (list: ReadonlyArray<Answer>) => (list.length === 0 ? 0 : Math.max(...list.map((a) => a.ms)))
  console.log(
    [
      "| during a database outage | value |",
      "|---|---|",
      `| outage | ${OUTAGE_SECONDS} s (all connections dropped, new ones refused) |`,
      `| REST writes: 200 / 503 retryable / other | ${count(byKind("rest"), (a) => a.status === 200)} / ${count(byKind("rest"), (a) => a.status === 503)} / ${count(byKind("rest"), (a) => a.status !== 200 && a.status !== 503)} |`,
      `| REST reads: 200 / 503 retryable / other | ${count(byKind("list"), (a) => a.status === 200)} / ${count(byKind("list"), (a) => a.status === 503)} / ${count(byKind("list"), (a) => a.status !== 200 && a.status !== 503)} |`,
      `| enforcement: block / allow | ${count(enforcement, (a) => a.body?.verdict === "block")} / ${count(enforcement, (a) => a.body?.verdict === "allow")} |`,
      `| slowest answer during the outage (deadline ${DEADLINE_MS} ms) | ${max(during).toFixed(0)} ms |`,
      `| /health during the outage: 200 / total | ${count(byKind("health"), (a) => a.status === 200)} / ${byKind("health").length} |`,
      `| recovered (first 200 after the database returned) | ${recoveredMs.toFixed(0)} ms |`,
      `| acknowledged spans stored / acknowledged | ${stored} / ${ids.length} |`,
      `| 500s or no answer, whole run | ${serverErrors.length} |`
    ].join("\n")
  )
  proxy.stop()
  // What the server said last (a crash says why here).
  if (problems.length > 0) console.error(`server output, last lines:\n${server.output().slice(-6000)}`)
  if (problems.length > 0) throw new Error(`outage suite failed:\n- ${problems.join("\n- ")}`)
  log("outage suite passed")
}

await runBench(main)
