import { SqlClient, SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Stream } from "effect"
import { PolicyStateUnavailable } from "#src/domain/Enforcement"
import type { Policy, PolicyType } from "#src/domain/Guardrail"
import type { AccountId } from "#src/domain/Ids"
import { EMPTY_RUN, evaluate, type HoldState, needsApproval, type ProposedAction, type RunState } from "#src/domain/PolicyEvaluation"
import { PolicyStore } from "./PolicyStore.ts"

const CHANNEL = "tapedeck_guardrails"
/** A safety net for a missed notification: cached policies are reloaded at least this often. */
const CACHE_TTL_MS = 30_000

const unavailable = (e: unknown) =>
  new PolicyStateUnavailable({ reason: e instanceof Error ? e.message.slice(0, 200) : "the policy store failed" })

/**
 * Every way the database can fail becomes PolicyStateUnavailable: statement errors, and the SqlError defects
 * the client raises when, say, a rollback on a dead connection fails.
 */
const orUnavailable = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, PolicyStateUnavailable, R> =>
  effect.pipe(
    Effect.mapError(unavailable),
    Effect.catchAllDefect((defect) => (defect instanceof SqlError.SqlError ? Effect.fail(unavailable(defect)) : Effect.die(defect)))
  )

interface PolicyRow {
  readonly id: string
  readonly type: PolicyType
  readonly project_id: string | null
  readonly enabled: boolean
  readonly params: Record<string, unknown>
  readonly created_at: Date
}

/** Policy state in PostgreSQL: policies cached per account, run counters locked per run. */
export const SqlPolicyStoreLive = Layer.scoped(
  PolicyStore,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    const cache = new Map<string, { readonly policies: ReadonlyArray<Policy>; readonly loadedAt: number }>()

    // Several instances: a change anywhere clears this instance's copy (PGlite is one process: no need).
    if (Option.isSome(pg)) {
      yield* pg.value.listen(CHANNEL).pipe(
        Stream.runForEach((accountId) => Effect.sync(() => cache.delete(accountId))),
        Effect.catchAllCause((cause) => Effect.logWarning("guardrail invalidation listener stopped", cause)),
        Effect.forkScoped
      )
    }

    const load = (accountId: AccountId) =>
      sql<PolicyRow>`
        SELECT id, type, project_id, enabled, params, created_at FROM guardrails
        WHERE account_id = ${accountId} AND deleted_at IS NULL
        ORDER BY created_at, id`.pipe(
        Effect.map((rows) =>
          rows.map((r): Policy => ({
            id: r.id,
            type: r.type,
            projectId: r.project_id,
            enabled: r.enabled,
            params: r.params,
            createdAt: r.created_at.toISOString()
          }))
        )
      )

    const policies = (accountId: AccountId) =>
      Effect.gen(function*() {
        const cached = cache.get(accountId)
        if (cached && Date.now() - cached.loadedAt < CACHE_TTL_MS) return cached.policies
        const loaded = yield* load(accountId)
        cache.set(accountId, { policies: loaded, loadedAt: Date.now() })
        return loaded
      }).pipe(orUnavailable)

    const invalidate = (accountId: AccountId) =>
      Effect.sync(() => cache.delete(accountId)).pipe(
        Effect.zipRight(Option.isSome(pg) ? Effect.asVoid(sql`SELECT pg_notify(${CHANNEL}, ${accountId})`) : Effect.void),
        Effect.ignore
      )

    const holdsFor = (accountId: AccountId, action: ProposedAction) =>
      sql<{ id: string; policy_id: string; status: HoldState["status"]; reason: string | null; expires_at: Date | null; consumed: boolean }>`
        SELECT DISTINCT ON (policy_id) id, policy_id, status, reason, expires_at, consumed
        FROM enforcement_holds
        WHERE account_id = ${accountId} AND run_id = ${action.runId}
          AND tool_name IS NOT DISTINCT FROM ${action.toolName ?? null}
          AND tool_args_hash IS NOT DISTINCT FROM ${action.toolArgsHash ?? null}
          AND model IS NOT DISTINCT FROM ${action.model ?? null}
        ORDER BY policy_id, created_at DESC`.pipe(
        Effect.map((rows) =>
          new Map(rows.map((r) => [r.policy_id, {
            id: r.id,
            policyId: r.policy_id,
            status: r.status,
            reason: r.reason,
            expiresAtMs: r.expires_at === null ? null : r.expires_at.getTime(),
            consumed: r.consumed
          } satisfies HoldState]))
        )
      )

    const decideAtomically = (accountId: AccountId, action: ProposedAction, list: ReadonlyArray<Policy>) =>
      Effect.gen(function*() {
        // The upsert takes the run's row lock for the transaction: concurrent checks of a run queue here.
        const rows = yield* sql<{ spent_usd: number; tokens: number; recent: RunState["recent"] }>`
          INSERT INTO enforcement_runs (account_id, run_id) VALUES (${accountId}, ${action.runId})
          ON CONFLICT (account_id, run_id) DO UPDATE SET updated_at = now()
          RETURNING spent_usd::float8 AS spent_usd, tokens::float8 AS tokens, recent`
        const row = rows[0]
        const run: RunState = row ? { spentUsd: row.spent_usd, tokens: row.tokens, recent: row.recent } : EMPTY_RUN
        const needsHolds = list.some((p) => needsApproval(p, action))
        const holds = needsHolds ? yield* holdsFor(accountId, action) : new Map<string, HoldState>()
        const now = Date.now()
        const evaluation = evaluate(list, action, run, holds, now)
        if (evaluation.verdict === "allow" && evaluation.next) {
          yield* sql`
            UPDATE enforcement_runs SET
              spent_usd = spent_usd + ${String(action.proposedUsd ?? 0)}::numeric,
              tokens = tokens + ${action.proposedTokens ?? 0},
              recent = ${JSON.stringify(evaluation.next.recent)}::jsonb
            WHERE account_id = ${accountId} AND run_id = ${action.runId}`
          if (evaluation.consumeHolds) {
            yield* sql`UPDATE enforcement_holds SET consumed = true WHERE id IN ${sql.in(evaluation.consumeHolds)}`
          }
          return evaluation
        }
        if (evaluation.openHold) {
          const id = crypto.randomUUID()
          const expires = evaluation.openHold.expiresInSeconds
          yield* sql`
            INSERT INTO enforcement_holds (id, account_id, policy_id, run_id, tool_name, tool_args_hash, model, status, expires_at)
            VALUES (${id}, ${accountId}, ${evaluation.openHold.policyId}, ${action.runId}, ${action.toolName ?? null},
                    ${action.toolArgsHash ?? null}, ${action.model ?? null}, 'pending',
                    ${expires === null ? null : new Date(now + expires * 1000).toISOString()}::timestamptz)`
          return { ...evaluation, holdId: id }
        }
        return evaluation
      }).pipe(sql.withTransaction, orUnavailable)

    return PolicyStore.of({ policies, decideAtomically, invalidate })
  })
)
