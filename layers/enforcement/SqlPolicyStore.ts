import { SqlClient, SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Stream } from "effect"
import { PolicyStateUnavailable } from "#src/domain/Enforcement"
import type { Policy, PolicyType } from "#src/domain/Guardrail"
import type { AccountId } from "#src/domain/Ids"
import {
  EMPTY_RUN,
  evaluate,
  type Evaluation,
  type HoldState,
  needsApproval,
  type ProposedAction,
  type RunState
} from "#src/domain/PolicyEvaluation"
import { type DecisionAudit, PolicyStore } from "./PolicyStore.ts"

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

    /** The decision's row, as parameters cast for an `INSERT … SELECT` (where a bare parameter would be text). */
    const decisionRow = (accountId: AccountId, action: ProposedAction, audit: DecisionAudit, evaluation: Evaluation) =>
      sql`SELECT ${audit.decisionId}::uuid, ${accountId}::uuid, ${action.runId}::text, ${audit.traceId ?? null}::uuid,
                 ${action.stepIndex ?? null}::bigint, ${action.toolName ?? null}::text, ${action.model ?? null}::text,
                 ${evaluation.verdict}::text, ${evaluation.policy?.id ?? null}::uuid, ${evaluation.policy?.type ?? null}::text,
                 ${evaluation.holdId ?? null}::uuid, ${evaluation.reason}::text,
                 ${performance.now() - audit.startedAt}::float8`

    const DECISION_COLUMNS = sql.literal(
      "(id, account_id, run_id, trace_id, step_index, tool_name, model, verdict, policy_id, policy_type, hold_id, reason, latency_ms)"
    )

    const recordDecision = (accountId: AccountId, action: ProposedAction, audit: DecisionAudit, evaluation: Evaluation) =>
      sql`INSERT INTO enforcement_decisions ${DECISION_COLUMNS} ${decisionRow(accountId, action, audit, evaluation)}
          ON CONFLICT (id) DO NOTHING`

    const counters = (action: ProposedAction, next: RunState) => ({
      usd: String(action.proposedUsd ?? 0),
      tokens: action.proposedTokens ?? 0,
      recent: JSON.stringify(next.recent)
    })

    /**
     * Optimistic path, for checks that no approval policy concerns: read the run (no lock), evaluate, then write the
     * counters only if the row is still the version read (its `xmin`), together with the decision, in one statement.
     * Two round trips and no transaction; `undefined` when another check of the run got in between (read again).
     */
    const decideOptimistically = (accountId: AccountId, action: ProposedAction, list: ReadonlyArray<Policy>, audit: DecisionAudit) =>
      Effect.gen(function*() {
        const rows = yield* sql<{ spent_usd: number; tokens: number; recent: RunState["recent"]; version: string }>`
          SELECT spent_usd::float8 AS spent_usd, tokens::float8 AS tokens, recent, xmin::text AS version
          FROM enforcement_runs WHERE account_id = ${accountId} AND run_id = ${action.runId}`
        const row = rows[0]
        const run: RunState = row ? { spentUsd: row.spent_usd, tokens: row.tokens, recent: row.recent } : EMPTY_RUN
        const evaluation = evaluate(list, action, run, new Map(), Date.now())
        if (evaluation.verdict !== "allow" || !evaluation.next) {
          yield* recordDecision(accountId, action, audit, evaluation)
          return evaluation
        }
        const c = counters(action, evaluation.next)
        const written = row
          ? yield* sql`
              WITH w AS (
                UPDATE enforcement_runs SET spent_usd = spent_usd + ${c.usd}::numeric, tokens = tokens + ${c.tokens},
                       recent = ${c.recent}::jsonb, updated_at = now()
                WHERE account_id = ${accountId} AND run_id = ${action.runId} AND xmin = ${row.version}::xid
                RETURNING 1),
              d AS (INSERT INTO enforcement_decisions ${DECISION_COLUMNS}
                    ${decisionRow(accountId, action, audit, evaluation)} FROM w ON CONFLICT (id) DO NOTHING)
              SELECT 1 FROM w`
          : yield* sql`
              WITH w AS (
                INSERT INTO enforcement_runs (account_id, run_id, spent_usd, tokens, recent)
                VALUES (${accountId}, ${action.runId}, ${c.usd}::numeric, ${c.tokens}, ${c.recent}::jsonb)
                ON CONFLICT (account_id, run_id) DO NOTHING
                RETURNING 1),
              d AS (INSERT INTO enforcement_decisions ${DECISION_COLUMNS}
                    ${decisionRow(accountId, action, audit, evaluation)} FROM w ON CONFLICT (id) DO NOTHING)
              SELECT 1 FROM w`
        return written.length === 1 ? evaluation : undefined
      })

    /** Locked path: the run's row lock held for the transaction (holds to read, open or consume). */
    const decideLocked = (accountId: AccountId, action: ProposedAction, list: ReadonlyArray<Policy>, audit: DecisionAudit) =>
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
        let evaluation = evaluate(list, action, run, holds, now)
        if (evaluation.verdict === "allow" && evaluation.next) {
          const c = counters(action, evaluation.next)
          yield* sql`
            UPDATE enforcement_runs SET spent_usd = spent_usd + ${c.usd}::numeric, tokens = tokens + ${c.tokens},
                   recent = ${c.recent}::jsonb
            WHERE account_id = ${accountId} AND run_id = ${action.runId}`
          if (evaluation.consumeHolds) {
            yield* sql`UPDATE enforcement_holds SET consumed = true WHERE id IN ${sql.in(evaluation.consumeHolds)}`
          }
        } else if (evaluation.openHold) {
          const id = crypto.randomUUID()
          const expires = evaluation.openHold.expiresInSeconds
          yield* sql`
            INSERT INTO enforcement_holds (id, account_id, policy_id, run_id, tool_name, tool_args_hash, model, status, expires_at)
            VALUES (${id}, ${accountId}, ${evaluation.openHold.policyId}, ${action.runId}, ${action.toolName ?? null},
                    ${action.toolArgsHash ?? null}, ${action.model ?? null}, 'pending',
                    ${expires === null ? null : new Date(now + expires * 1000).toISOString()}::timestamptz)`
          evaluation = { ...evaluation, holdId: id }
        }
        yield* recordDecision(accountId, action, audit, evaluation)
        return evaluation
      }).pipe(sql.withTransaction)

    /** Optimistic attempts before a run this contended takes the lock instead. */
    const OPTIMISTIC_ATTEMPTS = 4

    const decideAtomically = (accountId: AccountId, action: ProposedAction, list: ReadonlyArray<Policy>, audit: DecisionAudit) =>
      Effect.gen(function*() {
        if (!list.some((p) => needsApproval(p, action))) {
          for (let attempt = 0; attempt < OPTIMISTIC_ATTEMPTS; attempt++) {
            const evaluation = yield* decideOptimistically(accountId, action, list, audit)
            if (evaluation) return evaluation
          }
        }
        return yield* decideLocked(accountId, action, list, audit)
      }).pipe(orUnavailable)

    return PolicyStore.of({ policies, decideAtomically, invalidate })
  })
)
