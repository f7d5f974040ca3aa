import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"
import type { Insight, InsightKind, InsightSeverity, ListInsightsParams } from "#src/domain/Insight"
import type { TraceId } from "#src/domain/Ids"

interface InsightRow {
  readonly id: string
  readonly trace_id: string
  readonly kind: InsightKind
  readonly severity: InsightSeverity
  readonly message: string
  readonly details: unknown
  readonly created_at: Date
  readonly total: number
}

/** The account's insights, newest first; insights of deleted traces are not listed. */
export class InsightRepo extends Effect.Service<InsightRepo>()("tapedeck/InsightRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const list = Effect.fn("InsightRepo.list")(
      function* (accountId: AccountId, params: ListInsightsParams) {
        const conditions = [
          sql`i.account_id = ${accountId}`,
          sql`t.deleted_at IS NULL`,
          ...(params.trace_id === undefined ? [] : [sql`i.trace_id = ${params.trace_id}`]),
          ...(params.kind === undefined ? [] : [sql`i.kind = ${params.kind}`])
        ]
        const rows = yield* sql<InsightRow>`
          SELECT i.id, i.trace_id, i.kind, i.severity, i.message, i.details, i.created_at, count(*) OVER ()::int AS total
          FROM insights i JOIN traces t ON t.id = i.trace_id
          WHERE ${sql.and(conditions)}
          ORDER BY i.created_at DESC, i.id DESC
          LIMIT ${params.limit} OFFSET ${params.offset}`
        let total = rows[0]?.total
        if (total === undefined) {
          // Past the last page: count without the window.
          const counted = yield* sql<{ total: number }>`
            SELECT count(*)::int AS total FROM insights i JOIN traces t ON t.id = i.trace_id WHERE ${sql.and(conditions)}`
          total = counted[0]?.total ?? 0
        }
        return {
          items: rows.map(
            (r): Insight => ({
              id: r.id,
              traceId: r.trace_id as TraceId,
              kind: r.kind,
              severity: r.severity,
              message: r.message,
              details: r.details,
              createdAt: r.created_at.toISOString()
            })
          ),
          total,
          limit: params.limit,
          offset: params.offset
        }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { list } as const
  })
}) {}
