import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** The spans' references to shared parts, as the GIN index spans_content_refs indexes them (0030_shared_span_content). */
const REFS = `(COALESCE(s.input_refs, '{}') || COALESCE(s.output_refs, '{}'))`
const HAS_REFS = `(s.input_refs IS NOT NULL OR s.output_refs IS NOT NULL)`

/** The maintenance of shared span content: the sweep of released parts, and the conversion of spans stored whole. */
export class SharedContent extends Effect.Service<SharedContent>()("tapedeck/SharedContent", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /**
     * Deletes up to `batch` parts marked released more than `graceSeconds` ago that no span references, and clears
     * the mark of those a span still references; the number deleted. The marked rows are locked first (SKIP LOCKED:
     * instances sweep side by side), so a writer reusing one of them waits, then finds it gone and stores it again.
     */
    const sweep = Effect.fn("SharedContent.sweep")(
      function* (graceSeconds: number, batch: number) {
        const rows = yield* sql<{ deleted: number; kept: number }>`
          WITH marked AS (
            SELECT id FROM span_contents
            WHERE orphaned_at IS NOT NULL AND orphaned_at < now() - make_interval(secs => ${graceSeconds})
            ORDER BY orphaned_at
            LIMIT ${batch}
            FOR UPDATE SKIP LOCKED
          ), referenced AS (
            SELECT m.id FROM marked m
            WHERE EXISTS (SELECT 1 FROM spans s WHERE ${sql.literal(HAS_REFS)} AND ${sql.literal(REFS)} @> ARRAY[m.id])
          ), kept AS (
            UPDATE span_contents SET orphaned_at = NULL WHERE id IN (SELECT id FROM referenced) RETURNING 1
          ), deleted AS (
            DELETE FROM span_contents
            WHERE id IN (SELECT id FROM marked) AND id NOT IN (SELECT id FROM referenced)
            RETURNING 1
          )
          SELECT (SELECT count(*) FROM deleted)::int AS deleted, (SELECT count(*) FROM kept)::int AS kept`
        return rows[0] ?? { deleted: 0, kept: 0 }
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

    return { sweep, convertBatch } as const
  })
}) {}
