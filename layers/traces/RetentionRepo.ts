import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"

/** An account's retention as the purge applies it: days for traces without a project override, and the overrides. */
export interface RetentionPolicy {
  readonly accountId: AccountId
  /** null: kept until deleted (no account setting, no configured default). */
  readonly days: number | null
  /** The shortest of `days` and the project overrides: no trace younger than this can be expired. */
  readonly minDays: number
}

/** Retention settings (accounts.retention_days, project_retention) and the purge of expired traces. */
export class RetentionRepo extends Effect.Service<RetentionRepo>()("tapedeck/RetentionRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** The account's own setting and its projects' overrides. */
    const settings = Effect.fn("RetentionRepo.settings")(
      function* (accountId: AccountId) {
        const [account] = yield* sql<{ days: number | null }>`
          SELECT retention_days AS days FROM accounts WHERE id = ${accountId}`
        const projects = yield* sql<{ projectId: string; retentionDays: number }>`
          SELECT project_id AS "projectId", retention_days AS "retentionDays" FROM project_retention
          WHERE account_id = ${accountId} ORDER BY project_id`
        return { days: account?.days ?? null, projects }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const setAccount = Effect.fn("RetentionRepo.setAccount")(
      function* (accountId: AccountId, days: number | null) {
        yield* sql`UPDATE accounts SET retention_days = ${days}::int WHERE id = ${accountId}`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Sets the project's override; null removes it (the project then follows the account). */
    const setProject = Effect.fn("RetentionRepo.setProject")(
      function* (accountId: AccountId, projectId: string, days: number | null) {
        if (days === null) {
          yield* sql`DELETE FROM project_retention WHERE account_id = ${accountId} AND project_id = ${projectId}::uuid`
        } else {
          yield* sql`
            INSERT INTO project_retention (account_id, project_id, retention_days)
            VALUES (${accountId}, ${projectId}::uuid, ${days}::int)
            ON CONFLICT (account_id, project_id) DO UPDATE SET retention_days = EXCLUDED.retention_days`
        }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The accounts whose traces can expire, with the configured default applied (`defaultDays` null: none). */
    const policies = Effect.fn("RetentionRepo.policies")(
      function* (defaultDays: number | null) {
        const rows = yield* sql<{ id: AccountId; days: number | null; min_project: number | null }>`
          SELECT a.id, COALESCE(a.retention_days, ${defaultDays}::int) AS days,
                 (SELECT min(p.retention_days) FROM project_retention p WHERE p.account_id = a.id) AS min_project
          FROM accounts a
          WHERE COALESCE(a.retention_days, ${defaultDays}::int) IS NOT NULL
             OR EXISTS (SELECT 1 FROM project_retention p WHERE p.account_id = a.id)`
        return rows.map(
          (r): RetentionPolicy => ({
            accountId: r.id,
            days: r.days,
            minDays: Math.min(r.days ?? Infinity, r.min_project ?? Infinity)
          })
        )
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Removes up to `batch` of the account's traces that started longer ago than their retention (the project's
     * override, else the account's), oldest first, with their spans, vectors and rule matches (insights go with the
     * trace's foreign key); the traces and spans removed. Traces locked by a writer are skipped this round (SKIP
     * LOCKED), never waited for. The delete does not mark the shared parts its spans referenced released
     * (`tapedeck.release_parts` deferred, 0040_release_parts_in_order): it locks no part, so no writer waits on the
     * batch; their ids are recorded in `span_contents_released` in the same transaction (0042_released_parts_recorded),
     * and marked later by SharedContent.release, by this instance or any other.
     */
    const purgeExpired = Effect.fn("RetentionRepo.purgeExpired")(
      function* (policy: RetentionPolicy, batch: number) {
        const rows = yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT set_config('tapedeck.release_parts', 'deferred', true)`
            return yield* sql<{ traces: number; spans: number }>`
              WITH doomed AS (
                SELECT t.id FROM traces t
                LEFT JOIN project_retention p ON p.account_id = t.account_id AND p.project_id = t.project_id
                WHERE t.account_id = ${policy.accountId}
                  AND t.started_at < now() - make_interval(days => ${policy.minDays}::int)
                  AND t.started_at < now() - make_interval(days => COALESCE(p.retention_days, ${policy.days}::int))
                ORDER BY t.started_at
                LIMIT ${batch}
                FOR UPDATE OF t SKIP LOCKED
              ), gone_spans AS (
                DELETE FROM spans WHERE trace_id IN (SELECT id FROM doomed) RETURNING 1
              ), gone_embeddings AS (
                DELETE FROM span_embeddings WHERE trace_id IN (SELECT id FROM doomed)
              ), gone_matches AS (
                DELETE FROM eval_rule_matches WHERE trace_id IN (SELECT id FROM doomed)
              ), gone AS (
                DELETE FROM traces WHERE id IN (SELECT id FROM doomed) RETURNING 1
              )
              SELECT (SELECT count(*) FROM gone)::int AS traces, (SELECT count(*) FROM gone_spans)::int AS spans`
          })
        )
        const row = rows[0]
        return { traces: row?.traces ?? 0, spans: row?.spans ?? 0 }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { settings, setAccount, setProject, policies, purgeExpired } as const
  })
}) {}
