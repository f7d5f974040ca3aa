/**
 * Crash: while REST and OTLP ingestion run at a steady rate against the real PostgreSQL, the API process is killed
 * with SIGKILL at a random moment and started again. Run it with `bun test/reliability/crash.ts`.
 *
 * Checked after each restart:
 * - every span whose request was answered 200 is stored, exactly once (REST ids as sent; OTLP ids as mapped);
 * - OTLP exports that failed with the crash, re-sent afterwards the way an exporter retries, add no duplicate;
 * - the job queue finishes what the crash left: no job stays queued or running, none is dead-lettered, and each
 *   terminal trace has exactly one completed terminal-trace job (enqueued once per transition, completed once).
 *
 * Knobs: RELIABILITY_DATABASE_URL (admin URL of the server to create a scratch database on), RELIABILITY_ROUNDS
 * (kills, default 3), RELIABILITY_WORKERS (REST and OTLP clients each, default 3). Exit code 1 on any violation.
 */
import { accountNamespace, spanUuid, traceUuid } from "#layers/ingest/OtlpIds"
import {
  connect,
  freshDatabase,
  KEY,
  log,
  numberEnv,
  runBench,
  type Server,
  sleep,
  startServer
} from "../bench/Harness.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"

if (process.env.RELIABILITY_DATABASE_URL) process.env.BENCH_DATABASE_URL = process.env.RELIABILITY_DATABASE_URL
const ROUNDS = Math.floor(numberEnv("RELIABILITY_ROUNDS", 3))
const WORKERS = Math.floor(numberEnv("RELIABILITY_WORKERS", 3))
const SPANS_PER_REQUEST = 20
const headers = { "content-type": "application/json", "x-service-key": KEY }

/** What the clients were told: acknowledged REST spans by trace, OTLP exports acknowledged or left to retry. */
interface Ledger {
  readonly restSpans: Map<string, ReadonlyArray<string>>
  readonly otlpAcked: Array<{ traceHex: string; spanHexes: ReadonlyArray<string> }>
  readonly otlpToRetry: Array<{ traceHex: string; spanHexes: ReadonlyArray<string>; body: string }>
  failures: number
}

const restTrace = () => {
  const id = crypto.randomUUID()
  const root = crypto.randomUUID()
  const spans = Array.from({ length: SPANS_PER_REQUEST }, (_, i) => ({
    id: i === 0 ? root : crypto.randomUUID(),
    parent_id: i === 0 ? null : root,
    span_type: i % 2 === 0 ? "llm_call" : "tool_call",
    name: `step ${i}`,
    started_at: "2026-11-01T00:00:00.000Z",
    ended_at: "2026-11-01T00:00:01.000Z",
    input: { i },
    output: { ok: true }
  }))
  return {
    id,
    body: JSON.stringify({
      id,
      name: "crash-rest",
      status: "completed",
      started_at: "2026-11-01T00:00:00.000Z",
      spans
    }),
    spans
  }
}

const otlpExport = () => {
  const traceHex = hex(16)
  const rootHex = hex(8)
  const spans = Array.from({ length: SPANS_PER_REQUEST }, (_, i) =>
    otlpSpan({
      traceId: traceHex,
      spanId: i === 0 ? rootHex : hex(8),
      ...(i === 0 ? {} : { parentSpanId: rootHex }),
      name: `op ${i}`,
      endMs: 1000
    })
  )
  return { traceHex, spanHexes: spans.map((s) => s.spanId), body: JSON.stringify(exportBody(spans, "crash-otlp")) }
}

/** One client: sends until `stop`; a request the crash cut off is not acknowledged (OTLP ones are kept to re-send). */
const client = async (server: () => Server, kind: "rest" | "otlp", ledger: Ledger, stop: () => boolean) => {
  while (!stop()) {
    try {
      if (kind === "rest") {
        const t = restTrace()
        const res = await fetch(`${server().url}/api/v1/traces`, { method: "POST", headers, body: t.body })
        await res.arrayBuffer()
        if (res.status === 200)
          ledger.restSpans.set(
            t.id,
            t.spans.map((s) => s.id)
          )
        else ledger.failures++
      } else {
        const e = otlpExport()
        try {
          const res = await fetch(`${server().url}/v1/traces`, { method: "POST", headers, body: e.body })
          await res.arrayBuffer()
          if (res.status === 200) ledger.otlpAcked.push(e)
          else ledger.otlpToRetry.push(e)
        } catch {
          ledger.otlpToRetry.push(e)
          throw new Error("cut")
        }
      }
    } catch {
      ledger.failures++
      await sleep(20)
    }
  }
}

const main = async () => {
  const { databaseUrl } = await freshDatabase("tapedeck_crash_")
  const db = await connect(databaseUrl)
  let server = await startServer(databaseUrl, {
    extraEnv: { TAPEDECK_JOB_POLL_MS: "100", TAPEDECK_JOB_LEASE_SECONDS: "5" }
  })
  const ledger: Ledger = { restSpans: new Map(), otlpAcked: [], otlpToRetry: [], failures: 0 }
  const problems: Array<string> = []

  for (let round = 1; round <= ROUNDS; round++) {
    let stopped = false
    const clients = [
      ...Array.from({ length: WORKERS }, () =>
        client(
          () => server,
          "rest",
          ledger,
          () => stopped
        )
      ),
      ...Array.from({ length: WORKERS }, () =>
        client(
          () => server,
          "otlp",
          ledger,
          () => stopped
        )
      )
    ]
    const killAfter = 1500 + Math.floor(Math.random() * 3000)
    await sleep(killAfter)
    log(
      `round ${round}: SIGKILL after ${killAfter} ms (${ledger.restSpans.size} REST traces and ${ledger.otlpAcked.length} OTLP exports acknowledged so far)`
    )
    process.kill(server.pid, "SIGKILL")
    await sleep(300)
    stopped = true
    await Promise.all(clients)
    server = await startServer(databaseUrl, {
      extraEnv: { TAPEDECK_JOB_POLL_MS: "100", TAPEDECK_JOB_LEASE_SECONDS: "5" }
    })
    // The exporter's retry: every export the crash cut off is sent again to the restarted server.
    const retries = ledger.otlpToRetry.splice(0)
    for (const e of retries) {
      const res = await fetch(`${server.url}/v1/traces`, { method: "POST", headers, body: e.body })
      await res.arrayBuffer()
      if (res.status === 200) ledger.otlpAcked.push(e)
      else problems.push(`round ${round}: a re-sent OTLP export answered ${res.status}`)
    }
    log(`round ${round}: restarted; ${retries.length} cut-off OTLP exports re-sent`)
  }

  const account = (await db.query<{ id: string }>("SELECT id FROM accounts WHERE name = 'bench'")).rows[0]!.id
  const accountNs = accountNamespace(account)

  // Every acknowledged span stored exactly once.
  const expected = new Map<string, number>()
  for (const [traceId, spans] of ledger.restSpans) for (const s of spans) expected.set(`${traceId}/${s}`, 0)
  for (const e of ledger.otlpAcked) {
    const traceId = traceUuid(accountNs, e.traceHex)
    for (const s of e.spanHexes) expected.set(`${traceId}/${spanUuid(accountNs, e.traceHex, s)}`, 0)
  }
  const traceIds = [...new Set([...expected.keys()].map((k) => k.split("/")[0]!))]
  const rows = await db.query<{ trace_id: string; id: string; n: string }>(
    "SELECT trace_id, id, count(*) AS n FROM spans WHERE trace_id = ANY($1::uuid[]) GROUP BY trace_id, id",
    [traceIds]
  )
  for (const r of rows.rows) {
    const key = `${r.trace_id}/${r.id}`
    if (!expected.has(key)) problems.push(`an unexpected span ${key} in an acknowledged trace`)
    else expected.set(key, Number(r.n))
  }
  const missing = [...expected].filter(([, n]) => n === 0)
  const duplicated = [...expected].filter(([, n]) => n > 1)
  if (missing.length > 0) problems.push(`${missing.length} acknowledged spans missing, e.g. ${missing[0]![0]}`)
  if (duplicated.length > 0) problems.push(`${duplicated.length} spans stored more than once`)

  // The job queue finishes: nothing left queued or running, nothing dead, one completed terminal job per terminal trace.
  const deadline = Date.now() + 60_000
  let open = Infinity
  while (Date.now() < deadline) {
    open = Number(
      (await db.query<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE status IN ('queued', 'running')")).rows[0]!.n
    )
    if (open === 0) break
    await sleep(250)
  }
  if (open !== 0) problems.push(`${open} jobs still queued or running 60 s after the last restart`)
  const deadJobs = (
    await db.query<{ kind: string; attempts: number; error: string | null }>(
      "SELECT kind, attempts, error FROM jobs WHERE status = 'dead_letter'"
    )
  ).rows
  const dead = deadJobs.length
  if (dead !== 0) {
    problems.push(
      `${dead} jobs dead-lettered, e.g. ${deadJobs[0]!.kind} after ${deadJobs[0]!.attempts} attempts: ${deadJobs[0]!.error}`
    )
  }
  const terminal = await db.query<{ trace_id: string; n: string }>(
    `SELECT t.id AS trace_id, count(j.id) AS n FROM traces t
     LEFT JOIN jobs j ON j.kind = 'trace.terminal' AND j.status = 'completed' AND (j.payload->>'traceId')::uuid = t.id
     WHERE t.status IN ('completed', 'failed') AND t.id = ANY($1::uuid[]) GROUP BY t.id`,
    [traceIds]
  )
  const notOnce = terminal.rows.filter((r) => Number(r.n) !== 1)
  if (notOnce.length > 0)
    problems.push(
      `${notOnce.length} terminal traces without exactly one completed terminal job (e.g. ${notOnce[0]!.trace_id}: ${notOnce[0]!.n})`
    )

  console.log(
    [
      "| check | value |",
      "|---|---|",
      `| kills (SIGKILL at a random moment) | ${ROUNDS} |`,
      `| acknowledged REST traces / OTLP exports | ${ledger.restSpans.size} / ${ledger.otlpAcked.length} |`,
      `| acknowledged spans checked | ${expected.size} |`,
      `| missing / duplicated | ${missing.length} / ${duplicated.length} |`,
      `| requests cut off by the crashes | ${ledger.failures} |`,
      `| terminal traces / with exactly one completed terminal job | ${terminal.rows.length} / ${terminal.rows.length - notOnce.length} |`,
      `| jobs open after recovery / dead-lettered | ${open} / ${dead} |`
    ].join("\n")
  )
  await server.stop()
  if (problems.length > 0) throw new Error(`crash suite failed:\n- ${problems.join("\n- ")}`)
  log("crash suite passed")
}

await runBench(main)
