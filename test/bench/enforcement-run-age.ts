/**
 * What a check's batch statement costs as its run ages (not a test file: `bun test/bench/enforcement-run-age.ts`).
 *
 * A run's recent allowed actions (up to 5,000, what the loop breaker and the rate policy read) are rows of their own
 * (migration 0038), so writing a run should cost the same on its first step as on its 5,000th. For each age in
 * BENCH_RUN_AGES (default 0, 1000, 5000 actions already stored per run): 8 runs seeded with that many actions, then
 * BENCH_CONCURRENCY clients (default 4, two runs each, so no two statements ever race for one run, as inside an
 * instance) send the service's own batch statement (`tapedeck_check_batch`, one allowed check of one run, at the
 * version the previous statement answered) back to back for BENCH_SECONDS (default 5). Reported per age: statements/s,
 * latency p50 / p99 (statement and commit), and the PostgreSQL backends' CPU per statement (from /proc, when
 * PostgreSQL runs on this machine), beside the same figures for age 0 measured in the same run (the ceiling).
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_RUN_AGES (comma-separated), BENCH_CONCURRENCY, BENCH_SECONDS.
 */
import { existsSync, readFileSync } from "node:fs"
import {
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

const AGES = (process.env.BENCH_RUN_AGES || "0,1000,5000").split(",").map((s) => Number(s.trim()))
const CONCURRENCY = Math.floor(numberEnv("BENCH_CONCURRENCY", 4))
const SECONDS = numberEnv("BENCH_SECONDS", 5)
const RUNS = CONCURRENCY * 2
const MAX_RECENT = 5000
const ACCOUNT = "00000000-0000-4000-8000-0000000000a9"

const BATCH = `SELECT account_id, run_id, written, version FROM tapedeck_check_batch($1::text::jsonb, $2::text::jsonb,
  ARRAY[]::text[], $3::int)`

/** CPU seconds (user + system) a process has used, or undefined when it is not on this machine. */
const cpuSeconds = (pid: number) => {
  const path = `/proc/${pid}/stat`
  if (!existsSync(path)) return undefined
  const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

interface AgeResult {
  readonly age: number
  readonly statements: number
  readonly seconds: number
  readonly latencies: Array<number>
  readonly cpuPerStatementUs: number | undefined
}

runBench(async () => {
  const { databaseUrl, pgVersion } = await freshDatabase()
  log("migrating (the service started once on the fresh database)")
  const server = await startServer(databaseUrl)
  await server.stop()
  const admin = await connect(databaseUrl)
  const clients = await connectMany(databaseUrl, CONCURRENCY)
  const pids = await Promise.all(
    clients.map(async (c) => Number((await c.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid))
  )

  const measure = async (age: number): Promise<AgeResult> => {
    await admin.query("TRUNCATE enforcement_runs, enforcement_run_actions, enforcement_decisions")
    await admin.query(
      `INSERT INTO enforcement_runs (account_id, run_id, actions)
       SELECT $1::uuid, 'run-' || g, $2::bigint FROM generate_series(0, $3::int - 1) g`,
      [ACCOUNT, age, RUNS]
    )
    await admin.query(
      `INSERT INTO enforcement_run_actions (account_id, run_id, seq, tool, args, step, at_ms)
       SELECT $1::uuid, 'run-' || g, i, 'sql_query', 'args-' || i, i, 1764200000000 + i
       FROM generate_series(0, $3::int - 1) g, generate_series(GREATEST(1, $2::int - ${MAX_RECENT} + 1), $2::int) i`,
      [ACCOUNT, age, RUNS]
    )
    await admin.query("VACUUM ANALYZE enforcement_runs, enforcement_run_actions")
    const versions = new Map(
      (
        await admin.query<{ run_id: string; version: string }>(
          "SELECT run_id, xmin::text AS version FROM enforcement_runs"
        )
      ).rows.map((r) => [r.run_id, r.version])
    )
    log(`${fmtInt(age)} actions per run: ${CONCURRENCY} clients × ${SECONDS} s`)
    const latencies: Array<number> = []
    const cpu0 = pids.map(cpuSeconds)
    const start = performance.now()
    const end = start + SECONDS * 1000
    let step = age
    await Promise.all(
      clients.map(async (client, c) => {
        for (let i = 0; performance.now() < end; i++) {
          const runId = `run-${c * 2 + (i % 2)}`
          const decisionId = crypto.randomUUID()
          const at = Date.now()
          step++
          const runs = [
            {
              account_id: ACCOUNT,
              run_id: runId,
              version: versions.get(runId),
              usd: ["0.001"],
              tokens: 10,
              append: [{ tool: "sql_query", args: `args-${step}`, step, atMs: at, id: decisionId }]
            }
          ]
          const decisions = [
            {
              id: decisionId,
              account_id: ACCOUNT,
              run_id: runId,
              trace_id: null,
              step_index: step,
              tool_name: "sql_query",
              model: "gpt-4o",
              verdict: "allow",
              policy_id: null,
              policy_type: null,
              hold_id: null,
              reason: "no policy blocks or holds this action",
              latency_ms: 0.1
            }
          ]
          const t0 = performance.now()
          const { rows } = await client.query<{ written: boolean; version: string }>(BATCH, [
            JSON.stringify(runs),
            JSON.stringify(decisions),
            MAX_RECENT
          ])
          latencies.push(performance.now() - t0)
          if (rows[0]?.written !== true) throw new Error(`run ${runId} was not written: ${JSON.stringify(rows)}`)
          versions.set(runId, rows[0].version)
        }
      })
    )
    const seconds = (performance.now() - start) / 1000
    const cpu1 = pids.map(cpuSeconds)
    const cpu = cpu0.every((v) => v !== undefined) ? cpu1.reduce((sum, v, i) => sum! + v! - cpu0[i]!, 0) : undefined
    const stored = (
      await admin.query<{ n: number; longest: number }>(
        `SELECT count(*)::int AS n, max(c)::int AS longest
         FROM (SELECT count(*) AS c FROM enforcement_run_actions GROUP BY run_id) x`
      )
    ).rows[0]!
    if (stored.longest > MAX_RECENT) throw new Error(`a run kept ${stored.longest} actions (at most ${MAX_RECENT})`)
    return {
      age,
      statements: latencies.length,
      seconds,
      latencies,
      cpuPerStatementUs: cpu === undefined ? undefined : (cpu * 1e6) / latencies.length
    }
  }

  const results: Array<AgeResult> = []
  for (const age of AGES) results.push(await measure(age))
  await Promise.all(clients.map((c) => c.end()))
  const base = results.find((r) => r.age === 0) ?? results[0]!
  const rate = (r: AgeResult) => r.statements / r.seconds
  const rows = results.flatMap((r) => {
    const l = latencyStats(r.latencies)
    const b = latencyStats(base.latencies)
    return [
      [
        `${fmtInt(r.age)} actions per run: statements/s`,
        fmtInt(rate(r)),
        `${fmtInt(rate(base))} (age ${fmtInt(base.age)})`,
        fmtRatio(rate(r) / rate(base))
      ],
      [
        `${fmtInt(r.age)} actions per run: latency p50 / p99`,
        `${fmtMs(l.p50)} / ${fmtMs(l.p99)}`,
        `${fmtMs(b.p50)} / ${fmtMs(b.p99)}`,
        fmtRatio(b.p99 / l.p99)
      ],
      [
        `${fmtInt(r.age)} actions per run: PostgreSQL CPU per statement`,
        r.cpuPerStatementUs === undefined ? "n/a" : `${fmtInt(r.cpuPerStatementUs)} µs`,
        base.cpuPerStatementUs === undefined ? "n/a" : `${fmtInt(base.cpuPerStatementUs)} µs`,
        r.cpuPerStatementUs === undefined || base.cpuPerStatementUs === undefined
          ? "n/a"
          : fmtRatio(base.cpuPerStatementUs / r.cpuPerStatementUs)
      ]
    ]
  })
  console.log(
    [
      ...tableLines(["metric", "value", "ceiling (age 0, same run)", "ratio"], rows),
      "",
      `Command: \`${commandLine(["BENCH_DATABASE_URL", "BENCH_RUN_AGES", "BENCH_CONCURRENCY", "BENCH_SECONDS"], "test/bench/enforcement-run-age.ts")}\``,
      "",
      `- PostgreSQL ${pgVersion}; ${RUNS} runs, ${CONCURRENCY} clients (two runs each), one allowed check per statement; load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}.`,
      "- ratio: the fraction of the age-0 figure reached (throughput: value ÷ ceiling; latency and CPU: ceiling ÷ value)."
    ].join("\n")
  )
})
