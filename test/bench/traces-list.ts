/**
 * The trace listing of a large account: GET /api/v1/traces, unfiltered and with each filter, client-observed p50 and
 * p95 on the real PostgreSQL, beside two ceilings measured in the same run and interleaved with the listings: a bare
 * `SELECT 1` round trip through pg, and GET /health through the same server (HTTP and the framework, no query).
 *
 * The account's traces (BENCH_LIST_TRACES, default 1,000,000) and another account's (BENCH_LIST_OTHER_TRACES, default
 * 200,000) are written by one `INSERT … SELECT … FROM generate_series` each, with the listing's indexes dropped
 * during the load and created again from their own definitions (what migration 0019 made), then VACUUM ANALYZE.
 * The rows carry what the filters read (models, has_error, cost, duration, project, session) directly; no spans.
 * Requests are sequential, one at a time, in rounds that visit every case once (so noise spreads evenly).
 *
 *   bun test/bench/traces-list.ts     (BENCH_DATABASE_URL, BENCH_LIST_TRACES, BENCH_LIST_OTHER_TRACES, BENCH_LIST_ROUNDS)
 */
import {
  KEY,
  commandLine,
  connect,
  fmtInt,
  fmtMs,
  fmtRatio,
  freshDatabase,
  latencyStats,
  log,
  mark,
  numberEnv,
  runBench,
  startServer,
  tableLines
} from "./Harness.ts"
import { TOTAL_CAP } from "#src/domain/Trace"

const TRACES = numberEnv("BENCH_LIST_TRACES", 1_000_000)
const OTHER_TRACES = numberEnv("BENCH_LIST_OTHER_TRACES", 200_000)
const ROUNDS = numberEnv("BENCH_LIST_ROUNDS", 40)
const WARMUP_ROUNDS = 3
const TARGET_P95_MS = 100
const DAYS = 90

/** A project id of the seeded set (0..19). */
const project = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`

/**
 * The seeded distribution, per trace: 5 % running, 15 % failed; 10 % sandbox; 20 projects (10 % none); sessions of
 * 10 traces; names from six agents (0.5 % "escalation-review"); models (0.1 % "rare-model-x"); 3 % with an error span;
 * 1 % costing ≥ 1 USD; 1 % lasting ≥ 60 s; starts spread evenly over the last DAYS days, newest first by i.
 */
const SEED = `
  INSERT INTO traces (id, account_id, project_id, name, status, total_tokens, total_cost, total_duration_ms, span_count,
                      session_id, environment, started_at, ended_at, models, has_error)
  SELECT gen_random_uuid(), $1::uuid,
         CASE WHEN r1 < 0.1 THEN NULL ELSE ('00000000-0000-4000-8000-' || lpad(floor(r1 * 20)::int::text, 12, '0'))::uuid END,
         CASE WHEN r2 < 0.2 THEN 'checkout-agent' WHEN r2 < 0.4 THEN 'refund-agent' WHEN r2 < 0.6 THEN 'support-bot'
              WHEN r2 < 0.8 THEN 'plan-trip' WHEN r2 < 0.995 THEN 'search-agent' ELSE 'escalation-review' END || ' v' || (i % 7),
         CASE WHEN r3 < 0.05 THEN 'running' WHEN r3 < 0.20 THEN 'failed' ELSE 'completed' END,
         floor(r4 * 5000)::bigint,
         CASE WHEN r5 < 0.01 THEN round((1 + r4 * 5)::numeric, 4) ELSE round((r4 * 0.1)::numeric, 6) END,
         CASE WHEN r6 < 0.01 THEN 60000 + floor(r4 * 100000)::bigint ELSE floor(r4 * 30000)::bigint END,
         1 + floor(r4 * 20)::int,
         's-' || $3::text || '-' || (i / 10),
         CASE WHEN r7 < 0.1 THEN 'sandbox' ELSE 'production' END,
         now() - make_interval(secs => i * ($4::float8 * 86400 / $2::int)),
         CASE WHEN r3 < 0.05 THEN NULL ELSE now() - make_interval(secs => i * ($4::float8 * 86400 / $2::int)) + interval '5 seconds' END,
         CASE WHEN r8 < 0.001 THEN ARRAY['rare-model-x'] WHEN r8 < 0.5 THEN ARRAY['gpt-4o']
              WHEN r8 < 0.8 THEN ARRAY['claude-sonnet-4-5', 'gpt-4o-mini'] ELSE ARRAY['llama-3.1-70b'] END,
         r9 < 0.03
  FROM (
    SELECT i, random() AS r1, random() AS r2, random() AS r3, random() AS r4, random() AS r5, random() AS r6,
           random() AS r7, random() AS r8, random() AS r9
    FROM generate_series(1, $2::int) AS i
  ) g`

interface Case {
  readonly name: string
  readonly query: string
}

runBench(async () => {
  const db = await freshDatabase()
  log(`database ${db.database} (PostgreSQL ${db.pgVersion})`)
  // The server runs the migrations and creates the bench account from its key.
  const server = await startServer(db.databaseUrl)
  const admin = await connect(db.databaseUrl)
  const account = (await admin.query<{ id: string }>("SELECT id FROM accounts WHERE name = 'bench'")).rows[0]!.id
  const other = (
    await admin.query<{ id: string }>(
      "INSERT INTO accounts (id, name) VALUES (gen_random_uuid(), 'bench-other') RETURNING id"
    )
  ).rows[0]!.id

  const indexes = (
    await admin.query<{ name: string; def: string }>(
      "SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename = 'traces' AND indexname <> 'traces_pkey' ORDER BY 1"
    )
  ).rows
  log(`seeding ${fmtInt(TRACES)} + ${fmtInt(OTHER_TRACES)} traces (${indexes.length} indexes dropped meanwhile)`)
  let t0 = performance.now()
  for (const index of indexes) await admin.query(`DROP INDEX ${index.name}`)
  await admin.query("SELECT setseed(0.42)")
  await admin.query(SEED, [account, TRACES, "a", DAYS])
  await admin.query(SEED, [other, OTHER_TRACES, "b", DAYS])
  const seedSeconds = (performance.now() - t0) / 1000
  t0 = performance.now()
  await admin.query("SET maintenance_work_mem = '512MB'")
  for (const index of indexes) await admin.query(index.def)
  await admin.query("VACUUM ANALYZE traces")
  const indexSeconds = (performance.now() - t0) / 1000
  log(`seeded in ${seedSeconds.toFixed(1)} s, indexed and analyzed in ${indexSeconds.toFixed(1)} s`)

  const day = new Date(Date.now() - 86_400_000).toISOString()
  const week = new Date(Date.now() - 7 * 86_400_000).toISOString()
  const cases: ReadonlyArray<Case> = [
    { name: "no filter (total exact)", query: "" },
    { name: "no filter", query: "total=capped" },
    { name: "cursor: page 21 (after 1,000 rows)", query: "total=capped" /* the cursor is added below */ },
    { name: "environment=sandbox", query: "environment=sandbox&total=capped" },
    { name: "status=failed", query: "status=failed&total=capped" },
    { name: "status=running", query: "status=running&total=capped" },
    { name: "project_id", query: `project_id=${project(7)}&total=capped` },
    { name: "session_id (10 traces)", query: "session_id=s-a-4242&total=capped" },
    { name: "name contains 'checkout' (20 %)", query: "name=checkout&total=capped" },
    { name: "name contains 'escalation' (0.5 %)", query: "name=escalation&total=capped" },
    { name: "model=gpt-4o (50 %)", query: "model=gpt-4o&total=capped" },
    { name: "model=rare-model-x (0.1 %)", query: "model=rare-model-x&total=capped" },
    { name: "has_error=true", query: "has_error=true&total=capped" },
    { name: "started in the last day", query: `date_from=${encodeURIComponent(day)}&total=capped` },
    {
      name: "started 7 to 8 days ago",
      query: `date_from=${encodeURIComponent(new Date(Date.now() - 8 * 86_400_000).toISOString())}&date_to=${encodeURIComponent(week)}&total=capped`
    },
    { name: "min_cost=1 (1 %)", query: "min_cost=1&total=capped" },
    { name: "min_duration_ms=60000 (1 %)", query: "min_duration_ms=60000&total=capped" },
    {
      name: "status=completed, model=claude-sonnet-4-5, min_cost=0.05",
      query: "status=completed&model=claude-sonnet-4-5&min_cost=0.05&total=capped"
    },
    {
      name: "has_error=true, name contains 'refund', last 7 days",
      query: `has_error=true&name=refund&date_from=${encodeURIComponent(week)}&total=capped`
    }
  ]

  const get = async (path: string) => {
    const response = await fetch(`${server.url}${path}`, { headers: { "x-service-key": KEY } })
    const body = await response.text()
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${body}`)
    return body
  }
  // The cursor case pages 20 times to get its cursor, once.
  let cursor = ""
  for (let page = 0; page < 20; page++) {
    const body = JSON.parse(await get(`/api/v1/traces?limit=50&total=capped${cursor ? `&cursor=${cursor}` : ""}`))
    cursor = body.nextCursor
  }
  const pathOf = (c: Case) =>
    `/api/v1/traces?limit=50${c.query ? `&${c.query}` : ""}${c.name.startsWith("cursor") ? `&cursor=${cursor}` : ""}`

  const samples = new Map<string, Array<number>>(cases.map((c) => [c.name, []]))
  const totals = new Map<string, number>()
  const selectOne: Array<number> = []
  const health: Array<number> = []
  log(`${WARMUP_ROUNDS} warm-up and ${ROUNDS} measured rounds of ${cases.length} listings, SELECT 1 and GET /health`)
  for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
    const measured = round >= WARMUP_ROUNDS
    for (const c of cases) {
      const start = performance.now()
      const body = await get(pathOf(c))
      const ms = performance.now() - start
      if (measured) samples.get(c.name)!.push(ms)
      if (!totals.has(c.name)) totals.set(c.name, JSON.parse(body).total)
    }
    let start = performance.now()
    await admin.query("SELECT 1")
    if (measured) selectOne.push(performance.now() - start)
    start = performance.now()
    await (await fetch(`${server.url}/health`)).arrayBuffer()
    if (measured) health.push(performance.now() - start)
  }

  const one = latencyStats(selectOne)
  const h = latencyStats(health)
  const rows = cases.map((c) => {
    const s = latencyStats(samples.get(c.name)!)
    return [
      `GET /api/v1/traces ${c.name} p50 / p95`,
      `${fmtMs(s.p50)} / ${fmtMs(s.p95)}`,
      `p95 ≤ ${TARGET_P95_MS} ms${mark(s.p95 <= TARGET_P95_MS)}`,
      `${fmtMs(h.p95)}`,
      fmtRatio(h.p95 / s.p95),
      fmtInt(totals.get(c.name) ?? NaN)
    ]
  })
  console.log(
    [
      "",
      `Trace listing, ${fmtInt(TRACES)} traces in the account (+ ${fmtInt(OTHER_TRACES)} of another), PostgreSQL ${db.pgVersion} (${commandLine(["BENCH_DATABASE_URL", "BENCH_LIST_TRACES", "BENCH_LIST_OTHER_TRACES", "BENCH_LIST_ROUNDS"], "test/bench/traces-list.ts")})`,
      "",
      ...tableLines(["metric", "value", "target", "ceiling (GET /health p95)", "ratio", "total"], rows),
      "",
      `- Ceilings, interleaved with the listings: \`SELECT 1\` through pg p50 / p95 ${fmtMs(one.p50)} / ${fmtMs(one.p95)}; GET /health through the server p50 / p95 ${fmtMs(h.p50)} / ${fmtMs(h.p95)}.`,
      `- ${ROUNDS} measured rounds after ${WARMUP_ROUNDS} warm-up ones; each round requests every case once, sequentially (limit=50).`,
      `- total: what the first request answered. \`total=capped\` counts up to ${fmtInt(TOTAL_CAP + 1)} matches; the first case counts every match.`,
      `- Seeded in ${seedSeconds.toFixed(1)} s by generate_series; indexes built and ANALYZE in ${indexSeconds.toFixed(1)} s.`,
      "- ratio: ceiling ÷ value (p95)."
    ].join("\n")
  )
})
