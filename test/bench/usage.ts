/**
 * What usage counting costs OTLP ingestion: the one upsert each accepted export adds (usage_counters, all
 * writers on one hot row, the worst case) beside the export itself, on a fresh database on the real PostgreSQL.
 *
 *   bun test/bench/usage.ts        (BENCH_DATABASE_URL, BENCH_USAGE_EXPORTS, BENCH_USAGE_UPSERTS, BENCH_USAGE_CONCURRENCY)
 */
import {
  KEY,
  commandLine,
  connect,
  connectMany,
  fmtInt,
  fmtMs,
  fmtRatio,
  freshDatabase,
  latencyStats,
  log,
  numberEnv,
  runBench,
  startServer,
  tableLines
} from "./Harness.ts"

const EXPORTS = numberEnv("BENCH_USAGE_EXPORTS", 400)
const UPSERTS = numberEnv("BENCH_USAGE_UPSERTS", 5000)
const CONCURRENCY = numberEnv("BENCH_USAGE_CONCURRENCY", 8)
const SPANS = 100

const hex = (bytes: number) =>
  [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("")
const attr = (key: string, value: string | number) => ({
  key,
  value: typeof value === "string" ? { stringValue: value } : { intValue: String(value) }
})

const exportBody = () => {
  const traceId = hex(16)
  const now = BigInt(Date.now()) * 1_000_000n
  const spans = Array.from({ length: SPANS }, (_, i) => ({
    traceId,
    spanId: hex(8),
    name: "chat gpt-4o",
    kind: 3,
    startTimeUnixNano: String(now + BigInt(i) * 1_000_000n),
    endTimeUnixNano: String(now + BigInt(i + 1) * 1_000_000n),
    attributes: [
      attr("gen_ai.operation.name", "chat"),
      attr("gen_ai.request.model", "gpt-4o"),
      attr("gen_ai.usage.input_tokens", 12),
      attr("gen_ai.usage.output_tokens", 5)
    ]
  }))
  return JSON.stringify({
    resourceSpans: [{ resource: { attributes: [attr("service.name", "bench")] }, scopeSpans: [{ spans }] }]
  })
}

/** Runs `total` calls of `op` from `concurrency` loops; each call's latency in ms, and the wall time. */
const closedLoop = async (total: number, concurrency: number, op: (worker: number) => Promise<void>) => {
  const samples: Array<number> = []
  let next = 0
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (next < total) {
        next++
        const start = performance.now()
        await op(worker)
        samples.push(performance.now() - start)
      }
    })
  )
  return { samples, seconds: (performance.now() - t0) / 1000 }
}

runBench(async () => {
  const db = await freshDatabase()
  log(`database ${db.database} (PostgreSQL ${db.pgVersion})`)
  const server = await startServer(db.databaseUrl)
  const admin = await connect(db.databaseUrl)

  log(`${EXPORTS} OTLP exports of ${SPANS} spans at concurrency ${CONCURRENCY}`)
  const bodies = Array.from({ length: EXPORTS }, exportBody)
  let i = 0
  const exports = await closedLoop(EXPORTS, CONCURRENCY, async () => {
    const response = await fetch(`${server.url}/v1/traces`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-service-key": KEY },
      body: bodies[i++ % EXPORTS]!
    })
    await response.arrayBuffer()
    if (response.status !== 200) throw new Error(`export answered ${response.status}`)
  })
  const counted = (
    await admin.query<{ value: string }>(`SELECT value FROM usage_counters WHERE metric = 'otlp_requests'`)
  ).rows
  if (Number(counted[0]?.value ?? 0) !== EXPORTS)
    throw new Error(`counted ${counted[0]?.value} exports, sent ${EXPORTS}`)

  log(`${UPSERTS} counter upserts on one row from ${CONCURRENCY} connections`)
  const account = (await admin.query<{ id: string }>(`SELECT id FROM accounts LIMIT 1`)).rows[0]!.id
  const clients = await connectMany(db.databaseUrl, CONCURRENCY)
  const upserts = await closedLoop(UPSERTS, CONCURRENCY, async (worker) => {
    await clients[worker]!.query(
      `INSERT INTO usage_counters (account_id, month, metric, value) VALUES ($1, '2099-01', 'bench', 1)
       ON CONFLICT (account_id, month, metric) DO UPDATE SET value = usage_counters.value + EXCLUDED.value`,
      [account]
    )
  })
  await Promise.all(clients.map((c) => c.end()))

  const e = latencyStats(exports.samples)
  const u = latencyStats(upserts.samples)
  console.log(
    [
      "",
      `Usage counting (${commandLine(["BENCH_DATABASE_URL", "BENCH_USAGE_EXPORTS", "BENCH_USAGE_UPSERTS", "BENCH_USAGE_CONCURRENCY"], "test/bench/usage.ts")})`,
      "",
      ...tableLines(
        ["metric", "value", "share of an export"],
        [
          [`POST /v1/traces (${SPANS} spans, c=${CONCURRENCY}) p50 / p99`, `${fmtMs(e.p50)} / ${fmtMs(e.p99)}`, "—"],
          [`POST /v1/traces throughput`, `${fmtInt(EXPORTS / exports.seconds)} exports/s`, "—"],
          [
            `counter upsert, one hot row (c=${CONCURRENCY}) p50 / p99`,
            `${fmtMs(u.p50)} / ${fmtMs(u.p99)}`,
            `${fmtRatio(u.p50 / e.p50)} / ${fmtRatio(u.p99 / e.p99)}`
          ],
          [`counter upserts/s, one hot row`, `${fmtInt(UPSERTS / upserts.seconds)}/s`, "—"]
        ]
      )
    ].join("\n")
  )
})
