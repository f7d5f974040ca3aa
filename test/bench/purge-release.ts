/**
 * The retention purge's delete transaction and its release, A/B on one PostgreSQL database (not a test file: run it
 * with `bun test/bench/purge-release.ts`; BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test).
 *
 * BENCH_TRACES (2000) expired traces of BENCH_SPANS (50) spans, each span referencing 20 shared parts (15 of its own
 * trace's 40, 5 of 10 every trace shares), written in SQL. Then purged BENCH_BATCH (50) traces a batch, the batches
 * alternating between:
 * - "recorded" (this code): the delete records the released part ids in `span_contents_released` in its transaction
 *   (0042_released_parts_recorded), and the release drains them (SharedContent.release's statement);
 * - "returned" (before 0042): the delete records nothing, returns the ids as text (string_agg), and the release marks
 *   them from an array parameter (the statement SharedContent.release had).
 * The trigger function is replaced, in this database only, by one that does either by the setting's value. Reports
 * per side the delete transaction's time (begin to commit: what a writer of those traces can wait on) and the
 * release's, p50 / mean / max. BENCH_FIRST=1 gives the first batch to "returned".
 */
import pg from "pg"
import { ConfigProvider, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { BunContext } from "@effect/platform-bun"
import { StorageLive } from "#layers/storage/Sql"
import { freshDatabase } from "#src/testing/index"

const TRACES = Number(process.env.BENCH_TRACES ?? 2000)
const SPANS = Number(process.env.BENCH_SPANS ?? 50)
const BATCH = Number(process.env.BENCH_BATCH ?? 50)
/** 0: the first batch is "recorded"'s, 1: "returned"'s. */
const FIRST = Number(process.env.BENCH_FIRST ?? 0)
process.env.TEST_DATABASE_URL ??= process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

const database = await freshDatabase()
const runtime = ManagedRuntime.make(
  StorageLive.pipe(
    Layer.provide(BunContext.layer),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Error)),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(database.env)))))
  )
)
await runtime.runPromise(runtime.runtimeEffect)
await runtime.dispose()
const db = new pg.Client({ connectionString: database.env.DATABASE_URL })
await db.connect()
try {
  const acc = crypto.randomUUID()
  await db.query("INSERT INTO accounts (id, name) VALUES ($1, 'bench')", [acc])
  await db.query(
    `INSERT INTO span_contents (account_id, hash, body)
     SELECT $1::uuid, sha256(g::text::bytea), repeat('x', 300) FROM generate_series(1, $2::int * 40 + 10) g`,
    [acc, TRACES]
  )
  await db.query(
    `INSERT INTO traces (id, account_id, status, started_at)
     SELECT md5('t' || g)::uuid, $1::uuid, 'completed', now() - interval '400 days' - g * interval '1 second'
     FROM generate_series(1, $2::int) g`,
    [acc, TRACES]
  )
  await db.query(
    `INSERT INTO spans (trace_id, account_id, id, span_type, name, started_at, input_skel, input_refs)
     SELECT md5('t' || t)::uuid, $1::uuid, md5('s' || t || '.' || k)::uuid, 'llm_call', 'step',
            now() - interval '400 days', repeat(chr(1), 20),
            tapedeck_refs_text(ARRAY(SELECT CASE WHEN j < 5 THEN (k + j) % 10 + 1 ELSE 10 + (t - 1) * 40 + (k + j) % 40 + 1 END
                  FROM generate_series(0, 19) j)::bigint[])
     FROM generate_series(1, $2::int) t, generate_series(1, $3::int) k`,
    [acc, TRACES, SPANS]
  )
  // live spans of the account (the release leaves out what its latest spans use)
  await db.query(
    `INSERT INTO traces (id, account_id, status, started_at) VALUES (md5('live')::uuid, $1::uuid, 'completed', now())`,
    [acc]
  )
  await db.query(
    `INSERT INTO spans (trace_id, account_id, id, span_type, name, started_at, input_skel, input_refs)
     SELECT md5('live')::uuid, $1::uuid, md5('live' || k)::uuid, 'llm_call', 'step', now(), repeat(chr(1), 5),
            tapedeck_refs_text(ARRAY(SELECT j + 1 FROM generate_series(0, 4) j)::bigint[])
     FROM generate_series(1, 600) k`,
    [acc]
  )
  await db.query(`
    CREATE OR REPLACE FUNCTION tapedeck_spans_release_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('tapedeck.release_parts', true) = 'deferred-returned' THEN RETURN NULL; END IF;
      IF current_setting('tapedeck.release_parts', true) = 'deferred' THEN
        INSERT INTO span_contents_released (account_id, part_id)
        SELECT DISTINCT g.account_id, r.id FROM gone g
        CROSS JOIN LATERAL tapedeck_span_refs(g.input_refs, g.output_refs) AS r(id)
        WHERE g.input_refs IS NOT NULL OR g.output_refs IS NOT NULL;
        RETURN NULL;
      END IF;
      RAISE EXCEPTION 'not a deferred delete';
    END $$`)
  await db.query("VACUUM ANALYZE")

  const doomed = `
    WITH doomed AS (
      SELECT t.id FROM traces t WHERE t.account_id = $1 AND t.started_at < now() - interval '30 days'
      ORDER BY t.started_at LIMIT ${BATCH} FOR UPDATE OF t SKIP LOCKED
    )`
  const deleteRecorded = `${doomed}, gone_spans AS (
      DELETE FROM spans WHERE trace_id IN (SELECT id FROM doomed) RETURNING 1
    ), gone AS (DELETE FROM traces WHERE id IN (SELECT id FROM doomed) RETURNING 1)
    SELECT (SELECT count(*) FROM gone)::int AS traces, (SELECT count(*) FROM gone_spans)::int AS spans`
  const deleteReturned = `${doomed}, gone_spans AS (
      DELETE FROM spans WHERE trace_id IN (SELECT id FROM doomed) RETURNING input_refs, output_refs
    ), gone AS (DELETE FROM traces WHERE id IN (SELECT id FROM doomed) RETURNING 1)
    SELECT (SELECT count(*) FROM gone)::int AS traces, (SELECT count(*) FROM gone_spans)::int AS spans,
           (SELECT string_agg(DISTINCT r.id::text, ',') FROM gone_spans s
            CROSS JOIN LATERAL tapedeck_span_refs(s.input_refs, s.output_refs) AS r(id)) AS parts`
  const releaseRecorded = `
    WITH head AS MATERIALIZED (
      SELECT account_id FROM span_contents_released ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
    ), queued AS MATERIALIZED (
      SELECT q.id, q.part_id FROM span_contents_released q WHERE q.account_id = (SELECT account_id FROM head)
      ORDER BY q.id LIMIT 5000 FOR UPDATE SKIP LOCKED
    ), live AS (
      SELECT r.id FROM (
        SELECT s.input_refs, s.output_refs FROM spans s WHERE s.account_id = (SELECT account_id FROM head)
        ORDER BY s.started_at DESC LIMIT 500
      ) s CROSS JOIN LATERAL tapedeck_span_refs(s.input_refs, s.output_refs) AS r(id)
    ), doomed AS (
      SELECT c.id FROM span_contents c
      WHERE c.id IN (SELECT part_id FROM queued) AND c.account_id = (SELECT account_id FROM head)
        AND c.orphaned_at IS NULL AND NOT EXISTS (SELECT 1 FROM live WHERE live.id = c.id)
      ORDER BY c.id FOR UPDATE OF c
    ), marked AS (UPDATE span_contents SET orphaned_at = now() WHERE id IN (SELECT id FROM doomed) RETURNING 1
    ), drained AS (DELETE FROM span_contents_released WHERE id IN (SELECT id FROM queued) RETURNING 1)
    SELECT (SELECT count(*) FROM drained)::int AS drained, (SELECT count(*) FROM marked)::int AS marked`
  const releaseReturned = `
    WITH recent AS (
      SELECT s.input_refs, s.output_refs FROM spans s WHERE s.account_id = $1::uuid ORDER BY s.started_at DESC LIMIT 500
    ), live AS (
      SELECT r.id FROM recent s
      CROSS JOIN LATERAL tapedeck_span_refs(s.input_refs, s.output_refs) AS r(id)
    ), doomed AS (
      SELECT c.id FROM span_contents c
      WHERE c.id = ANY($2::bigint[]) AND c.account_id = $1::uuid AND c.orphaned_at IS NULL
        AND c.id NOT IN (SELECT id FROM live)
      ORDER BY c.id FOR UPDATE OF c
    ), marked AS (UPDATE span_contents SET orphaned_at = now() WHERE id IN (SELECT id FROM doomed) RETURNING 1)
    SELECT count(*)::int AS n FROM marked`

  const times = {
    recorded: { del: [] as number[], rel: [] as number[] },
    returned: { del: [] as number[], rel: [] as number[] }
  }
  const marked = { recorded: 0, returned: 0 }
  for (let i = 0; ; i++) {
    const side = (i + FIRST) % 2 === 0 ? "recorded" : "returned"
    const t0 = performance.now()
    await db.query("BEGIN")
    await db.query("SELECT set_config('tapedeck.release_parts', $1, true)", [
      side === "recorded" ? "deferred" : "deferred-returned"
    ])
    const { rows } = await db.query(side === "recorded" ? deleteRecorded : deleteReturned, [acc])
    await db.query("COMMIT")
    const t1 = performance.now()
    if (side === "recorded") {
      while (true) {
        const r = await db.query(releaseRecorded)
        marked.recorded += r.rows[0].marked
        if (r.rows[0].drained === 0) break
      }
    } else {
      const ids: string[] = rows[0].parts ? rows[0].parts.split(",") : []
      for (let c = 0; c < ids.length; c += 5000) {
        const r = await db.query(releaseReturned, [acc, `{${ids.slice(c, c + 5000).join(",")}}`])
        marked.returned += r.rows[0].n
      }
    }
    const t2 = performance.now()
    if (rows[0].traces === 0) break
    times[side].del.push(t1 - t0)
    times[side].rel.push(t2 - t1)
  }
  const fmt = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b)
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length
    return `p50 ${s[Math.floor(s.length / 2)]!.toFixed(1)} / mean ${mean.toFixed(1)} / max ${s[s.length - 1]!.toFixed(1)} ms`
  }
  console.log(`${TRACES} traces × ${SPANS} spans, ${BATCH} traces a batch, batches alternating:`)
  for (const side of ["recorded", "returned"] as const) {
    console.log(
      `${side}: ${times[side].del.length} batches; delete transaction ${fmt(times[side].del)}; release ${fmt(times[side].rel)}; parts marked ${marked[side]}`
    )
  }
} finally {
  await db.end()
  await database.drop()
}
