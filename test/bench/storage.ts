/**
 * Storage benchmark against a real PostgreSQL (not a test file: run it with `bun test/bench/storage.ts`).
 *
 * Two services side by side, each on a fresh database: "before", the service at BENCH_BEFORE_REF (default: the
 * commit before shared span content, migration 0030), extracted with `git archive` into a temporary directory
 * that borrows this checkout's node_modules, and "shared", this checkout. The same requests go to both,
 * alternating which goes first, so load on the machine falls on both alike.
 *
 * 1. REST workload: BENCH_RUNS runs of a BENCH_STEPS-step tool-using agent (a ~2 KB system prompt, 8 tool schemas,
 *    the history growing by each answer and tool result), one POST /api/v1/traces per run (a root span, then a model
 *    call and a tool call per step). Reports spans/s (spans over the time spent in requests), the bytes on disk per
 *    span (every table and index of the database after the job queue drained and a VACUUM, less the same before),
 *    and the p50 of GET /api/v1/traces/{id} over BENCH_DETAIL_REQUESTS requests.
 * 2. OTLP workload: BENCH_OTLP_RUNS runs of the same agent as GenAI chat spans (gen_ai.system_instructions,
 *    gen_ai.input.messages, gen_ai.output.messages, gen_ai.tool.definitions), one POST /v1/traces per run.
 * 3. Retention (BENCH_PURGE_SPANS > 0), on the shared side: BENCH_PURGE_SPANS spans that started 400 days ago, made
 *    cheaply but laid out as real writes lay them out: BENCH_PURGE_SOURCES (20) runs POSTed through the API, their
 *    search rows indexed (the job queue drained), then copied in SQL (INSERT ... SELECT, 400 traces a statement)
 *    with new trace and span ids, start times a second older each round, their span_embeddings rows, and their own
 *    copies of the shared parts only their source run references (new ids and hashes, same text), while the parts
 *    several runs share (the system prompt and tool schemas, which the live writes use too) stay shared. Then
 *    three phases of REST ingestion at BENCH_PURGE_RATE traces/s (open loop): quiet for BENCH_PURGE_SECONDS, the
 *    purge (retention set to 300 days through PUT /api/v1/retention, the server's retention loop running every
 *    second) until no expired trace is left, and quiet again for BENCH_PURGE_SECONDS. p50/p99 of each phase, the
 *    purge's duration and spans/s, and what the database's backends waited on during it (pg_stat_activity sampled
 *    every 100 ms). BENCH_PURGE_ONLY=1 runs only this phase (one server, no REST/OTLP workloads, no warm-up).
 *
 * 0. Warm-up (BENCH_WARMUP_RUNS, default 2; 0 for none): that many REST and OTLP runs to each side, jobs drained,
 *    before anything is measured, so that what a server does once (starting the thread OTLP exports are prepared on,
 *    compiling the hot code) is not counted per span.
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_RUNS (100), BENCH_STEPS (30), BENCH_OTLP_RUNS (30), BENCH_WARMUP_RUNS (2), BENCH_DETAIL_REQUESTS (60),
 * BENCH_JOB_DRAIN_SECONDS (300), BENCH_PURGE_SPANS (0: skipped), BENCH_PURGE_SECONDS (30), BENCH_PURGE_RATE (5),
 * BENCH_PURGE_SOURCES (20), BENCH_PURGE_TIMEOUT_SECONDS (900), BENCH_PURGE_ONLY,
 * BENCH_SHARED_SQL (SQL run on the shared side's database once it started: a variant to compare, such as an index
 * dropped, with BENCH_BEFORE_REF=HEAD for the same code on both sides), BENCH_SERVER_ENV (a JSON object of settings
 * given to both servers, e.g. {"TAPEDECK_JOB_POLL_MS":"600000"} to keep background jobs out of the ingest phase).
 */
import { mkdtempSync, rmSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type pg from "pg"
import {
  backendCpuMark,
  backendCpuSince,
  commandLine,
  connect,
  drainJobs,
  fmtInt,
  fmtMs,
  freshDatabase,
  KEY,
  latencyStats,
  log,
  numberEnv,
  onCleanup,
  processTreeCpuSeconds,
  ROOT,
  runBench,
  sleep,
  startServer,
  tableLines
} from "./Harness.ts"
import { otlpBody, restBody, STEPS } from "./AgentRun.ts"

const RUNS = numberEnv("BENCH_RUNS", 100)
const OTLP_RUNS = numberEnv("BENCH_OTLP_RUNS", 30)
const WARMUP_RUNS = Number(process.env.BENCH_WARMUP_RUNS ?? "2") || 0
const DETAIL_REQUESTS = numberEnv("BENCH_DETAIL_REQUESTS", 60)
const DRAIN_SECONDS = numberEnv("BENCH_JOB_DRAIN_SECONDS", 300)
const PURGE_SPANS = Number(process.env.BENCH_PURGE_SPANS ?? "0") || 0
const PURGE_SECONDS = numberEnv("BENCH_PURGE_SECONDS", 30)
const PURGE_RATE = numberEnv("BENCH_PURGE_RATE", 5)
const PURGE_SOURCES = numberEnv("BENCH_PURGE_SOURCES", 20)
const PURGE_TIMEOUT_SECONDS = numberEnv("BENCH_PURGE_TIMEOUT_SECONDS", 900)
const PURGE_ONLY = ["1", "true", "yes"].includes((process.env.BENCH_PURGE_ONLY ?? "").toLowerCase())
const KNOBS = [
  "BENCH_BEFORE_REF",
  "BENCH_DATABASE_URL",
  "BENCH_RUNS",
  "BENCH_STEPS",
  "BENCH_OTLP_RUNS",
  "BENCH_WARMUP_RUNS",
  "BENCH_DETAIL_REQUESTS",
  "BENCH_JOB_DRAIN_SECONDS",
  "BENCH_PURGE_SPANS",
  "BENCH_PURGE_SECONDS",
  "BENCH_PURGE_RATE",
  "BENCH_PURGE_SOURCES",
  "BENCH_PURGE_TIMEOUT_SECONDS",
  "BENCH_PURGE_ONLY",
  "BENCH_SHARED_SQL",
  "BENCH_SERVER_ENV"
]

// ---------------------------------------------------------------------------------------------- measuring

interface Side {
  readonly name: string
  readonly url: string
  readonly db: pg.Client
  readonly traceIds: Array<string>
  readonly pid: number
  readonly databaseUrl: string
  ingestMs: number
  spans: number
  bytesSent: number
}

const databaseBytes = async (db: pg.Client) => {
  await db.query("VACUUM")
  const rows = (
    await db.query<{ name: string; bytes: string }>(`
    SELECT c.relname AS name, (pg_total_relation_size(c.oid) - pg_indexes_size(c.oid)) AS bytes FROM pg_class c
    WHERE c.relkind IN ('r', 'm') AND c.relnamespace = 'public'::regnamespace
    UNION ALL
    SELECT t.relname || ' / ' || i.relname, pg_relation_size(i.oid) FROM pg_index x
    JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
    WHERE t.relkind IN ('r', 'm') AND t.relnamespace = 'public'::regnamespace`)
  ).rows
  // Each table's heap and TOAST, and each of its indexes apart (name "table / index"); their sum is the database's.
  return new Map(rows.map((r) => [r.name, Number(r.bytes)]))
}

/**
 * What a row of `table` (`spans`, or the search index's `span_embeddings`) holds for the side's REST traces, by
 * column: `pg_column_size` summed over the rows (the value as stored, compressed or not; NULLs take no bytes beyond
 * the row's null bitmap), and each whole row, per span of those traces.
 */
const columnBytes = async (side: Side, table: "spans" | "span_embeddings", otlp = false) => {
  const columns = (
    await side.db.query<{ name: string }>(
      "SELECT column_name AS name FROM information_schema.columns WHERE table_name = $1 AND table_schema = 'public' ORDER BY ordinal_position",
      [table]
    )
  ).rows.map((r) => r.name)
  const sums = columns.map((c) => `COALESCE(sum(pg_column_size(s.${c})), 0)::float8 AS "${c}"`).join(", ")
  const traces = otlp
    ? "trace_id IN (SELECT id FROM traces WHERE metadata ? 'otel' AND $1::uuid[] IS NOT NULL)"
    : "trace_id = ANY($1::uuid[])"
  const row = (
    await side.db.query<Record<string, number>>(
      `SELECT (SELECT count(*)::float8 FROM spans WHERE ${traces}) AS "(spans)", sum(pg_column_size(s.*))::float8 AS "(row)", ${sums} FROM ${table} s WHERE s.${traces}`,
      [side.traceIds]
    )
  ).rows[0]!
  const n = row["(spans)"] || 1
  return Object.entries(row)
    .filter(([k, v]) => k !== "(spans)" && v > 0)
    .map(([k, v]) => [k, v / n] as const)
    .sort((a, b) => b[1] - a[1])
}

const post = async (side: Side, path: string, body: unknown) => {
  const text = JSON.stringify(body)
  const t0 = performance.now()
  const res = await fetch(side.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-key": KEY },
    body: text
  })
  const answer = await res.text()
  const ms = performance.now() - t0
  if (res.status !== 200) throw new Error(`${path} answered ${res.status}: ${answer.slice(0, 500)}`)
  side.bytesSent += text.length
  return ms
}

/** Sends every body to both sides, alternating which one goes first. */
const ingest = async (
  sides: ReadonlyArray<Side>,
  bodies: (run: number) => unknown,
  runs: number,
  path: string,
  spansPerRun: number
) => {
  for (let run = 0; run < runs; run++) {
    const body = bodies(run)
    const order = run % 2 === 0 ? sides : [...sides].reverse()
    for (const side of order) {
      side.ingestMs += await post(side, path, body)
      side.spans += spansPerRun
      if (path === "/api/v1/traces") side.traceIds.push((body as { id: string }).id)
    }
  }
}

const detailP50 = async (sides: ReadonlyArray<Side>) => {
  const samples = new Map(sides.map((s) => [s.name, [] as Array<number>]))
  for (let i = 0; i < DETAIL_REQUESTS; i++) {
    const order = i % 2 === 0 ? sides : [...sides].reverse()
    for (const side of order) {
      const id = side.traceIds[i % side.traceIds.length]!
      const t0 = performance.now()
      const res = await fetch(`${side.url}/api/v1/traces/${id}`, { headers: { "x-service-key": KEY } })
      await res.arrayBuffer()
      if (res.status !== 200) throw new Error(`detail answered ${res.status}`)
      samples.get(side.name)!.push(performance.now() - t0)
    }
  }
  return new Map([...samples].map(([name, s]) => [name, latencyStats(s)]))
}

const growth = (before: Map<string, number>, after: Map<string, number>) => {
  const byTable = [...after]
    .map(([name, bytes]) => [name, bytes - (before.get(name) ?? 0)] as const)
    .filter(([, b]) => b > 0)
    .sort((a, b) => b[1] - a[1])
  return { total: byTable.reduce((s, [, b]) => s + b, 0), byTable }
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(2)} KB`
const mb = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MB`

const git = (...args: Array<string>) => {
  const out = Bun.spawnSync({ cmd: ["git", ...args], cwd: ROOT })
  if (out.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${out.stderr.toString()}`)
  return out.stdout.toString().trim()
}

/** A copy of the service at `ref` in a temporary directory (removed at cleanup), with this checkout's node_modules. */
const checkoutOf = (ref: string) => {
  const commit = git("rev-parse", "--verify", `${ref}^{commit}`)
  const dir = mkdtempSync(join(tmpdir(), "tapedeck-before-"))
  onCleanup(async () => rmSync(dir, { recursive: true, force: true }))
  const archive = Bun.spawnSync({ cmd: ["sh", "-c", `git archive ${commit} | tar -x -C ${dir}`], cwd: ROOT })
  if (archive.exitCode !== 0) throw new Error(`git archive ${commit}: ${archive.stderr.toString()}`)
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"))
  return { dir, commit }
}

const BEFORE_REF =
  process.env.BENCH_BEFORE_REF ||
  `${git("log", "--diff-filter=A", "--format=%H", "--", "layers/storage/migrations/0030_shared_span_content.ts").split("\n").pop()}^`

const startSide = async (name: string, root?: string): Promise<Side> => {
  const { databaseUrl } = await freshDatabase("tapedeck_bench_storage_")
  const server = await startServer(databaseUrl, {
    extraEnv: { TAPEDECK_RETENTION_INTERVAL_SECONDS: "1", ...JSON.parse(process.env.BENCH_SERVER_ENV || "{}") },
    ...(root ? { root } : {})
  })
  const db = await connect(databaseUrl)
  if (!root && process.env.BENCH_SHARED_SQL) await db.query(process.env.BENCH_SHARED_SQL)
  log(`${name}: server ${server.url}${root ? ` from ${root}` : ""}`)
  return { name, url: server.url, db, pid: server.pid, databaseUrl, traceIds: [], ingestMs: 0, spans: 0, bytesSent: 0 }
}

const workload = async (label: string, sides: ReadonlyArray<Side>, send: () => Promise<void>) => {
  const before = await Promise.all(sides.map((s) => databaseBytes(s.db)))
  for (const s of sides) Object.assign(s, { ingestMs: 0, spans: 0, bytesSent: 0 })
  // The server's CPU (with its workers) and its database's backends': the work per span, which the shared machine's
  // load does not inflate the way it inflates latency.
  const serverBefore = sides.map((s) => processTreeCpuSeconds(s.pid))
  const backendsBefore = await Promise.all(sides.map((s) => backendCpuMark(s.db)))
  await send()
  for (const s of sides) {
    const drained = await drainJobs(s.db, DRAIN_SECONDS)
    log(`${label} ${s.name}: jobs drained (${drained.before} → ${drained.left} in ${drained.seconds.toFixed(1)} s)`)
  }
  const dbCpu = await Promise.all(sides.map((s, i) => backendCpuSince(s.db, backendsBefore[i]!)))
  const after = await Promise.all(sides.map((s) => databaseBytes(s.db)))
  return sides.map((s, i) => ({
    side: s,
    spans: s.spans,
    sent: s.bytesSent,
    ms: s.ingestMs,
    serverCpu: processTreeCpuSeconds(s.pid) - serverBefore[i]!,
    dbCpu: dbCpu[i]!,
    ...growth(before[i]!, after[i]!)
  }))
}

// ---------------------------------------------------------------------------------------------- retention

const EXPIRED_DAYS = 400
const RETENTION_DAYS = 300

/** The columns of `table` in order, each as `rewrite` gives it (its name when `rewrite` has none). */
const columnList = async (db: pg.Client, table: string, rewrite: Record<string, string>) => {
  const columns = (
    await db.query<{ name: string }>(
      "SELECT column_name AS name FROM information_schema.columns WHERE table_name = $1 AND table_schema = 'public' ORDER BY ordinal_position",
      [table]
    )
  ).rows.map((r) => r.name)
  return { names: columns.join(", "), values: columns.map((c) => rewrite[c] ?? `t.${c}`).join(", ") }
}

/**
 * Writes BENCH_PURGE_SPANS expired spans: BENCH_PURGE_SOURCES runs through the API (with their search rows, once
 * the job queue drained), then copies of them in SQL, BENCH_PURGE_SOURCES traces a round, with new ids and start
 * times a second older each round. A copy's spans reference its own copies of the parts only its source run
 * references (new ids and hashes, same text) and the same parts as the source for those several runs share (the
 * system prompt and tool schemas, which every live write uses too): the layout of distinct runs written one by one.
 */
const writeExpired = async (side: Side) => {
  const perTrace = 2 * STEPS + 1
  const traces = Math.ceil(PURGE_SPANS / perTrace)
  const sources = Math.min(traces, PURGE_SOURCES)
  const old = Date.now() - EXPIRED_DAYS * 86_400_000
  const t0 = performance.now()
  let next = 0
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < sources) await post(side, "/api/v1/traces", restBody(next++, old))
    })
  )
  await drainJobs(side.db, DRAIN_SECONDS)
  const db = side.db
  await db.query(`
    CREATE TEMP TABLE purge_src AS
    SELECT id FROM traces WHERE started_at < now() - make_interval(days => ${RETENTION_DAYS})`)
  // The parts only one source run references: each copy gets its own.
  await db.query(`
    CREATE TEMP TABLE purge_own AS
    SELECT r.id FROM spans s JOIN purge_src ON purge_src.id = s.trace_id
    CROSS JOIN LATERAL unnest(COALESCE(tapedeck_refs(s.input_refs), '{}') || COALESCE(tapedeck_refs(s.output_refs), '{}')) AS r(id)
    GROUP BY r.id HAVING count(DISTINCT s.trace_id) = 1`)
  await db.query("ALTER TABLE purge_own ADD PRIMARY KEY (id)")
  const stride = Number((await db.query<{ n: string }>("SELECT max(id) + 1 AS n FROM span_contents")).rows[0]!.n)
  // The parts several source runs share (a handful): kept as they are, every other reference moves to its copy.
  const shared = (
    await db.query<{ id: string }>(`
      SELECT DISTINCT r.id::text AS id FROM spans s JOIN purge_src ON purge_src.id = s.trace_id
      CROSS JOIN LATERAL unnest(COALESCE(tapedeck_refs(s.input_refs), '{}') || COALESCE(tapedeck_refs(s.output_refs), '{}')) AS r(id)
      WHERE r.id NOT IN (SELECT id FROM purge_own)`)
  ).rows.map((r) => r.id)
  const copyId = (column: string) => `md5(t.${column}::text || c.n::text)::uuid`
  const remap = (column: string) =>
    `CASE WHEN t.${column} IS NULL THEN NULL ELSE tapedeck_refs_text(ARRAY(
       SELECT CASE WHEN u.r = ANY('{${shared.join(",")}}'::bigint[]) THEN u.r ELSE u.r + c.n * ${stride}::bigint END
       FROM unnest(tapedeck_refs(t.${column})) WITH ORDINALITY AS u(r, i) ORDER BY u.i)) END`
  const shift = (column: string) => `t.${column} - make_interval(secs => c.n)`
  const traceCols = await columnList(db, "traces", {
    id: copyId("id"),
    started_at: shift("started_at"),
    ended_at: shift("ended_at"),
    created_at: shift("created_at"),
    updated_at: shift("updated_at")
  })
  const spanCols = await columnList(db, "spans", {
    trace_id: copyId("trace_id"),
    id: copyId("id"),
    parent_id: copyId("parent_id"),
    started_at: shift("started_at"),
    ended_at: shift("ended_at"),
    input_refs: remap("input_refs"),
    output_refs: remap("output_refs")
  })
  const embeddingCols = await columnList(db, "span_embeddings", {
    trace_id: copyId("trace_id"),
    span_id: copyId("span_id"),
    started_at: shift("started_at")
  })
  // The search rows' secondary indexes are built once after the copies rather than row by row (the full-text GIN
  // index above all): the same indexes, in a fraction of the time.
  const embeddingIndexes = (
    await db.query<{ name: string; def: string }>(`
      SELECT i.indexname AS name, i.indexdef AS def FROM pg_indexes i
      JOIN pg_class c ON c.relname = i.indexname JOIN pg_index x ON x.indexrelid = c.oid
      WHERE i.schemaname = 'public' AND i.tablename = 'span_embeddings' AND NOT x.indisprimary`)
  ).rows
  for (const index of embeddingIndexes) await db.query(`DROP INDEX ${index.name}`)
  const took = { parts: 0, traces: 0, spans: 0, embeddings: 0, indexes: 0 }
  const timed = async (key: keyof typeof took, query: string) => {
    const t = performance.now()
    await db.query(query)
    took[key] += (performance.now() - t) / 1000
  }
  const rounds = Math.ceil(traces / sources) - 1
  const ROUNDS_PER_STATEMENT = Math.max(1, Math.floor(400 / sources))
  for (let from = 1; from <= rounds; from += ROUNDS_PER_STATEMENT) {
    const to = Math.min(rounds, from + ROUNDS_PER_STATEMENT - 1)
    const c = `generate_series(${from}, ${to}) AS c(n)`
    await db.query("BEGIN")
    await timed(
      "parts",
      `
      INSERT INTO span_contents (id, account_id, hash, body, packed)
      SELECT t.id + c.n * ${stride}::bigint, t.account_id, sha256(t.hash || convert_to(c.n::text, 'UTF8')), t.body,
             t.packed
      FROM span_contents t JOIN purge_own o ON o.id = t.id CROSS JOIN ${c}`
    )
    await timed(
      "traces",
      `
      INSERT INTO traces (${traceCols.names})
      SELECT ${traceCols.values} FROM traces t JOIN purge_src s ON s.id = t.id CROSS JOIN ${c}`
    )
    await timed(
      "spans",
      `
      INSERT INTO spans (${spanCols.names})
      SELECT ${spanCols.values} FROM spans t JOIN purge_src s ON s.id = t.trace_id CROSS JOIN ${c}`
    )
    await timed(
      "embeddings",
      `
      INSERT INTO span_embeddings (${embeddingCols.names})
      SELECT ${embeddingCols.values} FROM span_embeddings t JOIN purge_src s ON s.id = t.trace_id CROSS JOIN ${c}`
    )
    await db.query("COMMIT")
  }
  for (const index of embeddingIndexes) await timed("indexes", index.def)
  await db.query("SELECT setval('span_contents_id_seq', (SELECT max(id) FROM span_contents))")
  // Every reference of the first round's copies names a stored part.
  const dangling = await db.query<{ n: string }>(
    `
    SELECT count(*) AS n FROM spans s
    CROSS JOIN LATERAL unnest(COALESCE(tapedeck_refs(s.input_refs), '{}') || COALESCE(tapedeck_refs(s.output_refs), '{}')) AS r(id)
    WHERE s.trace_id = ANY($1::uuid[])
      AND NOT EXISTS (SELECT 1 FROM span_contents p WHERE p.id = r.id)`,
    [(await db.query<{ id: string }>("SELECT md5(id::text || '1') AS id FROM purge_src")).rows.map((r) => r.id)]
  )
  if (Number(dangling.rows[0]!.n) > 0) throw new Error(`${dangling.rows[0]!.n} references of the copies dangle`)
  await db.query("DROP TABLE purge_src, purge_own")
  log(
    `retention: copies written in ${((performance.now() - t0) / 1000).toFixed(1)} s (${Object.entries(took)
      .map(([k, v]) => `${k} ${v.toFixed(1)} s`)
      .join(", ")})`
  )
  await db.query("VACUUM ANALYZE")
  const spans = Number(
    (
      await db.query<{ n: string }>(
        `SELECT count(*) AS n FROM spans WHERE started_at < now() - make_interval(days => ${RETENTION_DAYS})`
      )
    ).rows[0]!.n
  )
  return { spans, traces: (rounds + 1) * sources, sources, seconds: (performance.now() - t0) / 1000 }
}

/**
 * REST ingestion at BENCH_PURGE_RATE traces/s (open loop: a request starts on schedule even while earlier ones are
 * still answering) until `done` resolves; the latencies of those answered 200 and the number of the others.
 */
const writeLoad = async (side: Side, done: Promise<unknown>) => {
  const latencies: Array<number> = []
  const errors: Array<string> = []
  const inFlight: Array<Promise<void>> = []
  let finished = false
  done.then(() => {
    finished = true
  })
  const start = performance.now()
  for (let run = 0; !finished; run++) {
    const body = restBody(writeRun++)
    inFlight.push(
      post(side, "/api/v1/traces", body).then(
        (ms) => void latencies.push(ms),
        (e) => void errors.push(String(e).slice(0, 200))
      )
    )
    await Promise.race([sleep(Math.max(0, start + ((run + 1) * 1000) / PURGE_RATE - performance.now())), done])
  }
  await Promise.all(inFlight)
  if (errors.length > 0) log(`${errors.length} writes failed, the first: ${errors[0]}`)
  return { ...latencyStats(latencies), errors: errors.length, latencies }
}
let writeRun = 100_000

/** What the backends of the side's database wait on (pg_stat_activity's wait events), sampled every 100 ms. */
const sampleWaits = (db: pg.Client, done: Promise<unknown>) => {
  const counts = new Map<string, number>()
  let samples = 0
  let finished = false
  done.then(() => {
    finished = true
  })
  const run = (async () => {
    while (!finished) {
      const rows = (
        await db.query<{ query: string; event: string }>(
          `SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 40) AS query, wait_event_type || ':' || wait_event AS event
           FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
             AND wait_event_type IN ('Lock', 'LWLock', 'IO', 'IPC')`
        )
      ).rows
      samples++
      for (const r of rows) counts.set(`${r.event} (${r.query})`, (counts.get(`${r.event} (${r.query})`) ?? 0) + 1)
      await sleep(100)
    }
  })()
  return run.then(() => ({ samples, counts: [...counts].sort((a, b) => b[1] - a[1]) }))
}

const purgeRun = async (side: Side) => {
  log(`retention: writing ${fmtInt(PURGE_SPANS)} expired spans`)
  const written = await writeExpired(side)
  log(
    `retention: ${fmtInt(written.spans)} expired spans (${fmtInt(written.traces)} traces, ${written.sources} through the API) in ${written.seconds.toFixed(1)} s`
  )
  const expired = async () =>
    Number(
      (
        await side.db.query<{ n: string }>(
          `SELECT count(*) AS n FROM traces WHERE started_at < now() - make_interval(days => ${RETENTION_DAYS})`
        )
      ).rows[0]!.n
    )
  const quiet1 = await writeLoad(side, sleep(PURGE_SECONDS * 1000))
  log(`retention: quiet phase p99 ${fmtMs(quiet1.p99)}`)
  const before = await expired()
  const watcher = await connect(side.databaseUrl)
  const res = await fetch(`${side.url}/api/v1/retention`, {
    method: "PUT",
    headers: { "content-type": "application/json", "x-service-key": KEY },
    body: JSON.stringify({ retention_days: RETENTION_DAYS })
  })
  if (res.status !== 200) throw new Error(`PUT /api/v1/retention answered ${res.status}: ${await res.text()}`)
  const t0 = performance.now()
  const purged = (async () => {
    let left = before
    while (left > 0 && performance.now() - t0 < PURGE_TIMEOUT_SECONDS * 1000) {
      await sleep(250)
      left = await expired()
    }
    return { left, seconds: (performance.now() - t0) / 1000 }
  })()
  const waits = sampleWaits(watcher, purged)
  const purging = await writeLoad(side, purged)
  const { left, seconds } = await purged
  log(`retention: purge phase p99 ${fmtMs(purging.p99)}, ${seconds.toFixed(1)} s`)
  const quiet2 = await writeLoad(side, sleep(PURGE_SECONDS * 1000))
  return { written, quiet1, purging, quiet2, before, left, seconds, waits: await waits }
}

// ---------------------------------------------------------------------------------------------- main

/** A table of each side's growth by table and index, bytes per span, the 14 largest. */
const growthByTable = (
  results: ReadonlyArray<{ side: { name: string }; spans: number; byTable: ReadonlyArray<readonly [string, number]> }>
) =>
  tableLines(
    ["layout", "tables (bytes per span)"],
    results.map((r) => [
      r.side.name,
      r.byTable
        .slice(0, 14)
        .map(([n, b]) => `${n} ${fmtInt(b / r.spans)}`)
        .join(", ")
    ])
  )

const purgeLines = (p: Awaited<ReturnType<typeof purgeRun>>) => {
  const phase = (name: string, l: { n: number; errors: number; p50: number; p99: number }) => [
    name,
    fmtInt(l.n),
    String(l.errors),
    fmtMs(l.p50),
    fmtMs(l.p99)
  ]
  const quiet = {
    ...latencyStats([...p.quiet1.latencies, ...p.quiet2.latencies]),
    errors: p.quiet1.errors + p.quiet2.errors
  }
  return [
    `Retention purge of ${fmtInt(p.written.spans)} expired spans (${fmtInt(p.before)} traces; made in ${p.written.seconds.toFixed(0)} s) during REST ingestion at ${PURGE_RATE} traces/s:`,
    "",
    ...tableLines(
      ["phase", "writes", "failed", "p50", "p99"],
      [
        phase("quiet", p.quiet1),
        phase("purge running", p.purging),
        phase("quiet again", p.quiet2),
        phase("both quiet phases", quiet)
      ]
    ),
    "",
    `purge: ${p.seconds.toFixed(1)} s, ${fmtInt(p.written.spans / p.seconds)} spans/s; expired traces left ${p.left}; ` +
      `p99 ratio ${(p.purging.p99 / quiet.p99).toFixed(2)} against both quiet phases (target ≤ 1.5)`,
    "",
    `Waits during the purge (${p.waits.samples} samples of pg_stat_activity; backends waiting, summed over samples):`,
    "",
    ...tableLines(
      ["wait (query)", "samples"],
      p.waits.counts.slice(0, 12).map(([k, n]) => [k.replaceAll("|", "/"), String(n)])
    )
  ]
}

runBench(async () => {
  if (PURGE_ONLY) {
    if (PURGE_SPANS <= 0) throw new Error("BENCH_PURGE_ONLY needs BENCH_PURGE_SPANS > 0")
    const side = await startSide("shared")
    const p = await purgeRun(side)
    console.log(
      [
        `# Storage: retention purge`,
        "",
        `\`${commandLine(KNOBS, "test/bench/storage.ts")}\``,
        "",
        ...purgeLines(p)
      ].join("\n")
    )
    return
  }
  const before = checkoutOf(BEFORE_REF)
  const sides = [await startSide(`before (${before.commit.slice(0, 9)})`, before.dir), await startSide("shared")]
  if (WARMUP_RUNS > 0) {
    // Run numbers of their own: the measured runs' bodies are not sent before.
    await ingest(sides, (run) => restBody(1_000_000 + run), WARMUP_RUNS, "/api/v1/traces", 2 * STEPS + 1)
    await ingest(sides, (run) => otlpBody(1_000_000 + run), WARMUP_RUNS, "/v1/traces", 2 * STEPS + 1)
    for (const s of sides) {
      await drainJobs(s.db, DRAIN_SECONDS)
      s.traceIds.length = 0
    }
    log(`warm-up: ${WARMUP_RUNS} REST and ${WARMUP_RUNS} OTLP runs to each side, not counted`)
  }
  const rest = await workload("REST", sides, () =>
    ingest(sides, (run) => restBody(run), RUNS, "/api/v1/traces", 2 * STEPS + 1)
  )
  const details = await detailP50(sides)
  const columns = await Promise.all(sides.map((s) => columnBytes(s, "spans")))
  const searchColumns = await Promise.all(sides.map((s) => columnBytes(s, "span_embeddings")))
  const otlp = await workload("OTLP", sides, () => ingest(sides, otlpBody, OTLP_RUNS, "/v1/traces", 2 * STEPS + 1))
  const otlpColumns = await Promise.all(sides.map((s) => columnBytes(s, "spans", true)))
  const lines = [
    `# Storage: ${RUNS} REST runs and ${OTLP_RUNS} OTLP runs of a ${STEPS}-step agent`,
    "",
    `\`${commandLine(KNOBS, "test/bench/storage.ts")}\``,
    "",
    ...tableLines(
      [
        "workload",
        "layout",
        "spans",
        "JSON sent",
        "database growth",
        "per span",
        "spans/s",
        "server CPU ms/1k spans",
        "DB CPU ms/1k spans",
        "detail p50"
      ],
      [
        ...rest.map((r) => [
          "REST",
          r.side.name,
          fmtInt(r.spans),
          mb(r.sent),
          mb(r.total),
          kb(r.total / r.spans),
          fmtInt(r.spans / (r.ms / 1000)),
          fmtInt((r.serverCpu * 1e6) / r.spans),
          fmtInt((r.dbCpu * 1e6) / r.spans),
          fmtMs(details.get(r.side.name)!.p50)
        ]),
        ...otlp.map((r) => [
          "OTLP",
          r.side.name,
          fmtInt(r.spans),
          mb(r.sent),
          mb(r.total),
          kb(r.total / r.spans),
          fmtInt(r.spans / (r.ms / 1000)),
          fmtInt((r.serverCpu * 1e6) / r.spans),
          fmtInt((r.dbCpu * 1e6) / r.spans),
          ""
        ])
      ]
    ),
    "",
    "Growth by table and index (REST workload):",
    "",
    ...growthByTable(rest),
    "",
    "Growth by table and index (OTLP workload):",
    "",
    ...growthByTable(otlp),
    "",
    "A `spans` row of the REST workload by column (`pg_column_size`, bytes per span):",
    "",
    ...tableLines(
      ["layout", "columns (bytes per span)"],
      rest.map((r, i) => [r.side.name, columns[i]!.map(([n, b]) => `${n} ${b.toFixed(0)}`).join(", ")])
    ),
    "",
    "A `span_embeddings` row (the search index) of the REST workload by column (`pg_column_size`, bytes per span):",
    "",
    ...tableLines(
      ["layout", "columns (bytes per span)"],
      rest.map((r, i) => [r.side.name, searchColumns[i]!.map(([n, b]) => `${n} ${b.toFixed(0)}`).join(", ")])
    ),
    "",
    "A `spans` row of the OTLP workload (warm-up runs included) by column (`pg_column_size`, bytes per span):",
    "",
    ...tableLines(
      ["layout", "columns (bytes per span)"],
      otlp.map((r, i) => [r.side.name, otlpColumns[i]!.map(([n, b]) => `${n} ${b.toFixed(0)}`).join(", ")])
    )
  ]
  if (PURGE_SPANS > 0) lines.push("", ...purgeLines(await purgeRun(sides[1]!)))
  console.log(lines.join("\n"))
})
