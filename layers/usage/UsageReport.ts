import { SqlClient } from "@effect/sql"
import { DateTime, Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"
import type { Usage } from "#src/domain/Usage"
import { AppConfig } from "../config/AppConfig.ts"
import { UsageCounters, usageMonth } from "./UsageCounters.ts"

/** First instant of the month and of the next one, as ISO strings. */
export const monthBounds = (month: string) => {
  const [year, m] = month.split("-").map(Number) as [number, number]
  return {
    start: new Date(Date.UTC(year, m - 1, 1)).toISOString(),
    end: new Date(Date.UTC(year, m, 1)).toISOString()
  }
}

/**
 * The account's usage in a calendar month, aggregated in SQL from the tables that record each use (traces,
 * replay_usage and replay_generations, evaluation_runs) plus the usage counters (OTLP requests, searches).
 */
export class UsageReport extends Effect.Service<UsageReport>()("tapedeck/UsageReport", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const counters = yield* UsageCounters

    const forMonth = Effect.fn("UsageReport.forMonth")(
      function* (accountId: AccountId, requested: string | undefined) {
        const month = requested ?? usageMonth(yield* DateTime.now)
        const { end, start } = monthBounds(month)
        const [traces, replays, replayWork, evaluations, counted, retention] = yield* Effect.all(
          [
            sql<{ traces: number; spans: number }>`
            SELECT count(*)::float8 AS traces, COALESCE(sum(span_count), 0)::float8 AS spans FROM traces
            WHERE account_id = ${accountId} AND created_at >= ${start}::timestamptz AND created_at < ${end}::timestamptz`,
            sql<{ used: number }>`
            SELECT used::float8 AS used FROM replay_usage WHERE account_id = ${accountId} AND month = ${month}`,
            sql<{ tokens: number; cost: string }>`
            SELECT COALESCE(sum(t.total_tokens), 0)::float8 AS tokens, COALESCE(sum(t.total_cost), 0)::text AS cost
            FROM replay_generations g JOIN traces t ON t.id = g.result_trace_id AND t.account_id = g.account_id
            WHERE g.account_id = ${accountId} AND g.usage_month = ${month}`,
            sql<{ runs: number; tokens: number; cost: string }>`
            SELECT count(*)::float8 AS runs,
                   COALESCE(sum(input_tokens + output_tokens), 0)::float8 AS tokens,
                   COALESCE(round(sum(cost_usd)::numeric, 6), 0)::text AS cost
            FROM evaluation_runs
            WHERE account_id = ${accountId} AND created_at >= ${start}::timestamptz AND created_at < ${end}::timestamptz`,
            counters.read(accountId, month),
            sql<{ days: number | null }>`SELECT retention_days AS days FROM accounts WHERE id = ${accountId}`
          ],
          { concurrency: "unbounded" }
        )
        const used = replays[0]?.used ?? 0
        const allowance = Math.max(0, config.replayMonthlyAllowance)
        return {
          month,
          periodStart: start,
          periodEnd: end,
          traces: { recorded: traces[0]?.traces ?? 0, spans: traces[0]?.spans ?? 0 },
          otlp: { requests: counted.get("otlp_requests") ?? 0 },
          replays: {
            used,
            allowance,
            remaining: Math.max(0, allowance - used),
            tokens: replayWork[0]?.tokens ?? 0,
            cost: replayWork[0]?.cost ?? "0"
          },
          evaluations: {
            runs: evaluations[0]?.runs ?? 0,
            judgeTokens: evaluations[0]?.tokens ?? 0,
            judgeCost: evaluations[0]?.cost ?? "0"
          },
          search: { queries: counted.get("search_queries") ?? 0 },
          retention: {
            retentionDays: retention[0]?.days ?? config.retentionDays,
            tracesPurged: counted.get("retention_traces_purged") ?? 0,
            spansPurged: counted.get("retention_spans_purged") ?? 0
          }
        } satisfies Usage
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { forMonth } as const
  }),
  dependencies: [AppConfig.Default, UsageCounters.Default]
}) {}
