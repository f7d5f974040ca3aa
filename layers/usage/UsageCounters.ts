import { SqlClient } from "@effect/sql"
import { DateTime, Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"

/** The metrics counted here (the rest of the usage report is read from the tables that record it). */
export type UsageMetric = "otlp_requests" | "search_queries" | "retention_traces_purged" | "retention_spans_purged"

/** The calendar month (UTC) a use is counted in, e.g. "2026-11". */
export const usageMonth = (now: DateTime.Utc) => DateTime.formatIso(now).slice(0, 7)

/**
 * Monthly per-account counters in PostgreSQL (table usage_counters), shared by every instance: one atomic
 * upsert per counted request. `increment` never fails the request it counts: a failed increment is logged and
 * dropped (usage is informational, the request already succeeded). `inStatement` counts inside a writer's own
 * statement instead, committed (or failed) with its writes.
 */
export class UsageCounters extends Effect.Service<UsageCounters>()("tapedeck/UsageCounters", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** The upsert adding `by` to the metric of the account for the current month. */
    const upsert = (accountId: AccountId, metric: UsageMetric, by: number) =>
      Effect.map(
        DateTime.now,
        (now) => sql`
          INSERT INTO usage_counters (account_id, month, metric, value)
          VALUES (${accountId}, ${usageMonth(now)}, ${metric}, ${by})
          ON CONFLICT (account_id, month, metric) DO UPDATE SET value = usage_counters.value + EXCLUDED.value`
      )

    /** Adds `by` to the metric of the account for the current month. Never fails. */
    const increment = Effect.fn("UsageCounters.increment")(function* (
      accountId: AccountId,
      metric: UsageMetric,
      by = 1
    ) {
      yield* Effect.flatten(upsert(accountId, metric, by)).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning("usage counter not incremented", cause).pipe(Effect.annotateLogs({ metric }))
        )
      )
    })

    /**
     * For a writer that counts its request in its own statement (one round trip and one commit fewer): a CTE named
     * `usage_row` adding `by` to the metric, to follow other CTEs (it starts with a comma). It is then counted
     * exactly when that statement's writes commit, and fails with them. Put it in the transaction's last statement:
     * the counter's row stays locked until the commit.
     */
    const inStatement = (accountId: AccountId, metric: UsageMetric, by = 1) =>
      Effect.map(upsert(accountId, metric, by), (statement) => sql`, usage_row AS (${statement})`)

    /** The account's counters for a month, by metric (missing metrics are 0). */
    const read = Effect.fn("UsageCounters.read")(
      function* (accountId: AccountId, month: string) {
        const rows = yield* sql<{ metric: string; value: number }>`
          SELECT metric, value::float8 AS value FROM usage_counters
          WHERE account_id = ${accountId} AND month = ${month}`
        return new Map(rows.map((r) => [r.metric, r.value]))
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { increment, inStatement, read } as const
  })
}) {}
