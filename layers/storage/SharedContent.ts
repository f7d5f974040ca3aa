import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { packPart } from "../traces/PartPacking.ts"
import { uuidArray } from "./SqlArrays.ts"

/** The ids of the spans' references to shared parts (0030_shared_span_content) as rows r(id) (0047_refs_delta_text). */
const REFS = "tapedeck_span_refs(s.input_refs, s.output_refs) AS r(id)"
const HAS_REFS = `(s.input_refs IS NOT NULL OR s.output_refs IS NOT NULL)`
/** The account's latest spans whose parts a release leaves unmarked. */
const RECENT_SPANS = 500

/** The maintenance of shared span content: the sweep of released parts, and the conversion of spans stored whole. */
export class SharedContent extends Effect.Service<SharedContent>()("tapedeck/SharedContent", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /**
     * Deletes up to `batch` parts marked released more than `graceSeconds` ago that no span references, and clears
     * the mark of those a span still references; the numbers deleted and kept. In two steps, so that no lock is held
     * while the references are read (the spans are not indexed by the parts they reference: one pass over the
     * references of the parts' accounts answers for the whole batch):
     * 1. without locks, the oldest marked parts, each with its mark's time and whether a span references it;
     * 2. in one short statement, those still marked at the same time are locked (SKIP LOCKED: instances sweep side
     *    by side, and a writer unmarking one holds it) and deleted, or unmarked when referenced.
     * A part whose mark changed in between was unmarked by a writer (and maybe marked again): it is left for a later
     * sweep. One marked at the time read in step 1 was marked all along, so no writer found it unmarked since it was
     * marked; a writer that found it unmarked before did so more than the grace period before step 1 and had
     * committed by then, its span seen by step 1's reading; a writer that finds it marked unmarks it, which waits for
     * step 2's lock and then finds the part gone (and stores it again).
     */
    const sweep = Effect.fn("SharedContent.sweep")(
      function* (graceSeconds: number, batch: number) {
        const marked = yield* sql<{ id: string; account_id: string; marked: string }>`
          SELECT id::text AS id, account_id, orphaned_at::text AS marked FROM span_contents
          WHERE orphaned_at IS NOT NULL AND orphaned_at < now() - make_interval(secs => ${graceSeconds})
          ORDER BY orphaned_at
          LIMIT ${batch}`
        // Nothing released: the spans are not read at all (the purge runs this every interval).
        if (marked.length === 0) return { deleted: 0, kept: 0, seen: 0 }
        const accounts = [...new Set(marked.map((m) => m.account_id))]
        const referencedRows = yield* sql<{ id: string }>`
          SELECT DISTINCT r.id::text AS id FROM spans s CROSS JOIN LATERAL ${sql.literal(REFS)}
          WHERE s.account_id = ANY(${uuidArray(accounts)}::uuid[]) AND ${sql.literal(HAS_REFS)}
            AND r.id IN (SELECT unnest(${`{${marked.map((m) => m.id).join(",")}}`}::bigint[]))`
        const referenced = new Set(referencedRows.map((r) => r.id))
        const candidates = marked.map((m) => ({ ...m, referenced: referenced.has(m.id) }))
        const rows = yield* sql<{ deleted: number; kept: number }>`
          WITH c AS (
            SELECT * FROM unnest(
              ${`{${candidates.map((c) => c.id).join(",")}}`}::bigint[],
              ${`{${candidates.map((c) => `"${c.marked}"`).join(",")}}`}::text[],
              ${`{${candidates.map((c) => (c.referenced ? "t" : "f")).join(",")}}`}::boolean[]
            ) AS c(id, marked, referenced)
          ), locked AS (
            SELECT p.id, c.referenced FROM span_contents p JOIN c ON c.id = p.id AND p.orphaned_at::text = c.marked
            FOR UPDATE OF p SKIP LOCKED
          ), kept AS (
            UPDATE span_contents SET orphaned_at = NULL WHERE id IN (SELECT id FROM locked WHERE referenced) RETURNING 1
          ), deleted AS (
            DELETE FROM span_contents WHERE id IN (SELECT id FROM locked WHERE NOT referenced) RETURNING 1
          )
          SELECT (SELECT count(*) FROM deleted)::int AS deleted, (SELECT count(*) FROM kept)::int AS kept`
        return { ...(rows[0] ?? { deleted: 0, kept: 0 }), seen: candidates.length }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Marks released (candidates for the sweep) the parts recorded in `span_contents_released` by deletes that
     * deferred the marking (the retention purge's, 0040_release_parts_in_order and 0042_released_parts_recorded): up to
     * `batch` rows of one account (that of the oldest row no other call holds), and deletes those rows, in one
     * statement (its own transaction): a process that dies before or during it leaves the rows for the next call, on
     * any instance. Rows another call holds are skipped (SKIP LOCKED), so instances drain side by side. Left out are
     * the parts any of the account's RECENT_SPANS latest spans references: the parts every new run reuses (system
     * prompt, tool schemas) stay unmarked, so writers do not have to unmark them after every purge batch. Leaving a
     * referenced part unmarked loses nothing: whoever deletes the span that references it releases it then. One
     * account a statement keeps the recent spans' references one small set (one account's RECENT_SPANS spans). The
     * parts are locked in id order (as writers unmarking parts do), so no writer and no other release waits on it in a
     * cycle; the rows drained (0: none left but those other calls hold) and the parts marked.
     */
    const release = Effect.fn("SharedContent.release")(
      function* (batch: number) {
        const rows = yield* sql<{ drained: number; marked: number }>`
          WITH head AS MATERIALIZED (
            SELECT account_id FROM span_contents_released
            ORDER BY id
            LIMIT 1
            FOR UPDATE SKIP LOCKED
          ), queued AS MATERIALIZED (
            SELECT q.id, q.part_id FROM span_contents_released q
            WHERE q.account_id = (SELECT account_id FROM head)
            ORDER BY q.id
            LIMIT ${batch}
            FOR UPDATE SKIP LOCKED
          ), live AS (
            SELECT r.id FROM (
              SELECT s.input_refs, s.output_refs FROM spans s
              WHERE s.account_id = (SELECT account_id FROM head)
              ORDER BY s.started_at DESC
              LIMIT ${RECENT_SPANS}
            ) s
            CROSS JOIN LATERAL ${sql.literal(REFS)}
          ), doomed AS (
            SELECT c.id FROM span_contents c
            WHERE c.id IN (SELECT part_id FROM queued)
              AND c.account_id = (SELECT account_id FROM head)
              AND c.orphaned_at IS NULL
              AND NOT EXISTS (SELECT 1 FROM live WHERE live.id = c.id)
            ORDER BY c.id
            FOR UPDATE OF c
          ), marked AS (
            UPDATE span_contents SET orphaned_at = now() WHERE id IN (SELECT id FROM doomed) RETURNING 1
          ), drained AS (
            DELETE FROM span_contents_released WHERE id IN (SELECT id FROM queued) RETURNING 1
          )
          SELECT (SELECT count(*) FROM drained)::int AS drained, (SELECT count(*) FROM marked)::int AS marked`
        return rows[0] ?? { drained: 0, marked: 0 }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Converts the next `batch` spans (in key order after the recorded position) to the shared layout: rewriting a
     * payload runs the split trigger, which leaves small ones inline. The position row is locked for the batch (SKIP
     * LOCKED: one instance converts at a time, the others go on); whether spans were left to convert.
     */
    const convertBatch = Effect.fn("SharedContent.convertBatch")(
      function* (batch: number) {
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const [position] = yield* sql<{ trace_id: string | null; span_id: string | null; done: boolean }>`
            SELECT trace_id, span_id, done FROM span_content_conversion FOR UPDATE SKIP LOCKED`
            if (position === undefined) return true
            if (position.done) return false
            const [last] = yield* sql<{ trace_id: string | null; span_id: string | null; n: number; seen: number }>`
            WITH next AS (
              SELECT trace_id, id FROM spans
              WHERE ${position.trace_id === null ? sql`true` : sql`(trace_id, id) > (${position.trace_id}::uuid, ${position.span_id}::uuid)`}
              ORDER BY trace_id, id
              LIMIT ${batch}
            ), converted AS (
              UPDATE spans s SET input = s.input, output = s.output
              FROM next
              WHERE s.trace_id = next.trace_id AND s.id = next.id
                AND (octet_length(s.input::text) >= 1024 OR octet_length(s.output::text) >= 1024)
              RETURNING 1
            ), tail AS (
              SELECT trace_id, id FROM next ORDER BY trace_id DESC, id DESC LIMIT 1
            )
            SELECT (SELECT trace_id FROM tail) AS trace_id, (SELECT id FROM tail) AS span_id,
                   (SELECT count(*) FROM converted)::int AS n, (SELECT count(*) FROM next)::int AS seen`
            const done = (last?.seen ?? 0) < batch
            yield* sql`
            UPDATE span_content_conversion SET
              trace_id = COALESCE(${last?.trace_id ?? null}::uuid, trace_id),
              span_id = COALESCE(${last?.span_id ?? null}::uuid, span_id),
              converted = converted + ${last?.n ?? 0}, done = ${done}`
            return !done
          })
        )
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Compresses, in place, the next `batch` parts stored plain (in id order after the recorded position; migration
     * 0045_packed_parts_sent) that compression pays for; whether parts were left to look at. They are read and
     * compressed outside any transaction; then one short transaction takes the position (SKIP LOCKED: one instance
     * at a time), checks it did not move meanwhile, and rewrites the parts still plain, locked in id order and
     * skipping any a writer or the sweep holds (left plain: a part is read the same either way). A part's text
     * never changes under its id, so what was read is still its text.
     */
    const packBatch = Effect.fn("SharedContent.packBatch")(
      function* (batch: number) {
        const [position] = yield* sql<{ last_id: string; done: boolean }>`
          SELECT last_id::text AS last_id, done FROM span_content_packing`
        if (position === undefined || position.done) return false
        const rows = yield* sql<{ id: string; body: string }>`
          SELECT c.id::text AS id, c.body FROM span_contents c
          WHERE c.id > ${position.last_id}::bigint AND c.body IS NOT NULL
          ORDER BY c.id
          LIMIT ${batch}`
        const packed: Array<{ id: string; packed: string }> = []
        for (const r of rows) {
          const bytes = packPart(r.body)
          if (bytes !== undefined) packed.push({ id: r.id, packed: bytes.toString("base64") })
        }
        const done = rows.length < batch
        const last = rows.length > 0 ? rows[rows.length - 1]!.id : position.last_id
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const [held] = yield* sql<{ last_id: string }>`
              SELECT last_id::text AS last_id FROM span_content_packing FOR UPDATE SKIP LOCKED`
            // Another instance holds it, or moved it meanwhile: this batch is its.
            if (held === undefined || held.last_id !== position.last_id) return false
            const [changed] = yield* sql<{ n: number }>`
              WITH v AS (
                SELECT * FROM unnest(
                  ${`{${packed.map((p) => p.id).join(",")}}`}::bigint[],
                  ARRAY(SELECT decode(t, 'base64') FROM json_array_elements_text(${JSON.stringify(packed.map((p) => p.packed))}::json) WITH ORDINALITY AS e(t, i) ORDER BY i)
                ) AS v(id, packed)
              ), locked AS (
                SELECT c.id FROM span_contents c WHERE c.id IN (SELECT id FROM v) AND c.body IS NOT NULL
                ORDER BY c.id
                FOR UPDATE OF c SKIP LOCKED
              ), updated AS (
                UPDATE span_contents c SET body = NULL, packed = v.packed FROM v
                WHERE c.id = v.id AND c.id IN (SELECT id FROM locked)
                RETURNING 1
              )
              SELECT count(*)::int AS n FROM updated`
            yield* sql`
              UPDATE span_content_packing SET last_id = ${last}::bigint, packed = packed + ${changed?.n ?? 0}, done = ${done}`
            return !done
          })
        )
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { sweep, release, convertBatch, packBatch } as const
  })
}) {}
