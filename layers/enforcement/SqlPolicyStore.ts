import { SqlClient, SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Stream } from "effect"
import { CredentialRevoked } from "#src/domain/ApiKey"
import { PolicyStateUnavailable } from "#src/domain/Enforcement"
import type { Policy, PolicyType } from "#src/domain/Guardrail"
import type { AccountId } from "#src/domain/Ids"
import {
  type ActionRecord,
  EMPTY_RUN,
  evaluate,
  type Evaluation,
  type HoldState,
  MAX_RECENT,
  needsApproval,
  type ProposedAction,
  type RunState
} from "#src/domain/PolicyEvaluation"
import { type DecisionAudit, type FailClosedRecord, PolicyStore } from "./PolicyStore.ts"
import { isKeyRevoked } from "../storage/ApiKeyRepo.ts"
import { uuidArray } from "../storage/SqlArrays.ts"

const CHANNEL = "tapedeck_guardrails"
/** A safety net for a missed notification: cached policies are reloaded at least this often. */
const CACHE_TTL_MS = 30_000
/** Runs whose last known state this instance keeps (least recently used out first), and their recent actions in all. */
const MAX_CACHED_RUNS = 10_000
const MAX_CACHED_RECENT = 200_000
/** Optimistic attempts before a run this contended takes the lock instead. */
const OPTIMISTIC_ATTEMPTS = 4

const NO_HOLDS: ReadonlyMap<string, HoldState> = new Map()

const unavailable = (e: unknown) =>
  new PolicyStateUnavailable({ reason: e instanceof Error ? e.message.slice(0, 200) : "the policy store failed" })

/**
 * Every way the database can fail becomes PolicyStateUnavailable: statement errors, and the SqlError defects
 * the client raises when, say, a rollback on a dead connection fails.
 */
const orUnavailable = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, PolicyStateUnavailable, R> =>
  effect.pipe(
    Effect.mapError((e) => (e instanceof PolicyStateUnavailable ? e : unavailable(e))),
    Effect.catchAllDefect((defect) => (defect instanceof SqlError.SqlError ? Effect.fail(unavailable(defect)) : Effect.die(defect)))
  )

/** As `orUnavailable`, but a statement that found the caller's API key revoked (migration 0014) is CredentialRevoked. */
const orUnavailableOrRevoked = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, PolicyStateUnavailable | CredentialRevoked, R> =>
  effect.pipe(
    Effect.mapError((e): PolicyStateUnavailable | CredentialRevoked =>
      e instanceof PolicyStateUnavailable || e instanceof CredentialRevoked ? e : isKeyRevoked(e) ? new CredentialRevoked() : unavailable(e)
    ),
    Effect.catchAllDefect((defect): Effect.Effect<never, PolicyStateUnavailable | CredentialRevoked> =>
      isKeyRevoked(defect)
        ? Effect.fail(new CredentialRevoked())
        : defect instanceof SqlError.SqlError
        ? Effect.fail(unavailable(defect))
        : Effect.die(defect)
    )
  )

interface PolicyRow {
  readonly id: string
  readonly type: PolicyType
  readonly project_id: string | null
  readonly enabled: boolean
  readonly params: Record<string, unknown>
  readonly created_at: Date
}

/** A run as this instance last saw it: its counters and the row version (`xmin`) they belong to. */
interface KnownRun {
  readonly run: RunState
  readonly version: string
}

/**
 * What a check's statement answers: `written` with the row's new counters and version; or not written, with the
 * row as it is now (no row at all: not written and the run does not exist yet).
 */
interface WriteResult {
  readonly written: boolean
  readonly spent_usd: number | null
  readonly tokens: number | null
  readonly recent: ReadonlyArray<ActionRecord> | null
  readonly version: string | null
}

// ---------------------------------------------------------------------------------------------- statements
//
// One statement per check attempt, with `$n` parameters. $1…$13 are the decision's record; the statement kinds add their own after it. Each
// statement also answers the run's current row when it did not write, so a retry needs no read of its own. The
// optimistic ones are functions (migration 0015), so PostgreSQL plans them once per connection, not per check.

const DECISION_COLUMNS =
  "(id, account_id, run_id, trace_id, step_index, tool_name, model, verdict, policy_id, policy_type, hold_id, reason, latency_ms)"
/**
 * The latency recorded: from the check's start to its statement being sent ($13), plus the statement's own time in
 * PostgreSQL up to this row. Waiting for a free connection in this process and the commit are not in it.
 */
const DECISION_VALUES = `$3::uuid, $1::uuid, $2::text, $4::uuid, $5::bigint, $6::text, $7::text, $8::text, $9::uuid,
  $10::text, $11::uuid, $12::text,
  $13::float8 + 1000 * extract(epoch FROM clock_timestamp() - statement_timestamp())::float8`
const RECORD_ARGS = `$1::uuid, $2::text, $3::uuid, $4::uuid, $5::bigint, $6::text, $7::text, $8::text, $9::uuid, $10::text,
  $11::uuid, $12::text, $13::float8`

/**
 * Allow on a run at version $14: the counters advance only if the row is still that version, with the record; `recent`
 * gets $17 and keeps its last MAX_RECENT entries (as `evaluate` does). $18 (and the last parameter of the other two) is
 * the API key the caller was verified with from a cache (NULL: verified just now): when something was written,
 * `tapedeck_require_live_key` runs on it, and a key revoked meanwhile undoes the whole statement (SQLSTATE TD401).
 */
const ALLOW_EXISTING = `SELECT * FROM tapedeck_check_allow_existing(${RECORD_ARGS},
  $14::text, $15::numeric, $16::bigint, $17::text::jsonb, $18::text, ${MAX_RECENT})`

/** Allow on a run not seen yet: its row is created with the counters, with the record, unless it exists by now. */
const ALLOW_NEW = `SELECT * FROM tapedeck_check_allow_new(${RECORD_ARGS}, $14::numeric, $15::bigint, $16::text::jsonb, $17::text)`

/** Block: only the record, and only if the run is still the version evaluated ($14, NULL for no row yet). */
const BLOCK = `SELECT * FROM tapedeck_check_block(${RECORD_ARGS}, $14::text, $15::text)`

/** A statement runner: `$n` parameters in, rows out, every failure PolicyStateUnavailable (or CredentialRevoked). */
type Run = <A>(
  text: string,
  params: ReadonlyArray<unknown>
) => Effect.Effect<ReadonlyArray<A>, PolicyStateUnavailable | CredentialRevoked>

/** What a decision is made of (see PolicyStore.decideAtomically). */
type DecisionArgs = [
  accountId: AccountId,
  action: ProposedAction,
  list: ReadonlyArray<Policy>,
  audit: DecisionAudit,
  liveKey: string | null
]

/** Policy state in PostgreSQL: policies cached per account, run counters written optimistically per run. */
export const SqlPolicyStoreLive = Layer.scoped(
  PolicyStore,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    const run: Run = (text, params) => orUnavailableOrRevoked(sql.unsafe<any>(text, params))

    // ------------------------------------------------------------------------------------------ policies

    const cache = new Map<string, { readonly policies: ReadonlyArray<Policy>; readonly loadedAt: number }>()
    /** Bumped by every invalidation: a load that began before one is not kept (it may predate the change). */
    let generation = 0
    const forget = (accountId: string) => {
      generation++
      cache.delete(accountId)
    }

    // Several instances: a change anywhere clears this instance's copy (PGlite is one process: no need).
    if (Option.isSome(pg)) {
      yield* pg.value.listen(CHANNEL).pipe(
        Stream.runForEach((accountId) => Effect.sync(() => forget(accountId))),
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

    const policies = (accountId: AccountId): Effect.Effect<ReadonlyArray<Policy>, PolicyStateUnavailable> => {
      const cached = cache.get(accountId)
      if (cached !== undefined && Date.now() - cached.loadedAt < CACHE_TTL_MS) return Effect.succeed(cached.policies)
      return Effect.suspend(() => {
        const startedIn = generation
        return load(accountId).pipe(
          Effect.tap((loaded) => {
            if (generation === startedIn) cache.set(accountId, { policies: loaded, loadedAt: Date.now() })
          })
        )
      }).pipe(orUnavailable)
    }

    const invalidate = (accountId: AccountId) =>
      Effect.sync(() => forget(accountId)).pipe(
        Effect.zipRight(Option.isSome(pg) ? Effect.asVoid(sql`SELECT pg_notify(${CHANNEL}, ${accountId})`) : Effect.void),
        Effect.ignore
      )

    // ------------------------------------------------------------------------------------------ runs

    // The last state seen of recent runs. Only a guess: every write is conditional on the row's version, so a stale
    // entry (another instance wrote since) costs one more statement, never a wrong count.
    const runs = new Map<string, KnownRun>()
    let cachedRecent = 0
    const runKey = (accountId: AccountId, runId: string) => `${accountId}\u0000${runId}`
    const remember = (key: string, known: KnownRun | undefined) => {
      const old = runs.get(key)
      if (old !== undefined) {
        runs.delete(key)
        cachedRecent -= old.run.recent.length
      }
      if (known === undefined) return
      runs.set(key, known)
      cachedRecent += known.run.recent.length
      while (runs.size > MAX_CACHED_RUNS || cachedRecent > MAX_CACHED_RECENT) {
        const [oldestKey, oldest] = runs.entries().next().value!
        runs.delete(oldestKey)
        cachedRecent -= oldest.run.recent.length
      }
    }

    const decisionParams = (
      accountId: AccountId,
      action: ProposedAction,
      audit: DecisionAudit,
      evaluation: Pick<Evaluation, "verdict" | "policy" | "reason" | "holdId">,
      latencyMs: number = performance.now() - audit.startedAt
    ) => [
      accountId,
      action.runId,
      audit.decisionId,
      audit.traceId ?? null,
      action.stepIndex ?? null,
      action.toolName ?? null,
      action.model ?? null,
      evaluation.verdict,
      evaluation.policy?.id ?? null,
      evaluation.policy?.type ?? null,
      evaluation.holdId ?? null,
      evaluation.reason,
      latencyMs
    ]

    const lastRecord = (next: RunState) => JSON.stringify(next.recent.slice(-1))

    /**
     * Optimistic path, for checks that no approval policy concerns: evaluate against the run as last seen, then one
     * statement writes the decision (and on allow the counters) only if the row is still that version. When it is
     * not, the statement answers the row as it is, and the next attempt evaluates against that.
     */
    const decideOptimistically = (...[accountId, action, list, audit, liveKey]: DecisionArgs) =>
      Effect.gen(function*() {
        const key = runKey(accountId, action.runId)
        let known = runs.get(key)
        for (let attempt = 0; attempt < OPTIMISTIC_ATTEMPTS; attempt++) {
          if (audit.abandoned) return yield* new PolicyStateUnavailable({ reason: "answered before the decision was stored" })
          const evaluation = evaluate(list, action, known?.run ?? EMPTY_RUN, NO_HOLDS, Date.now())
          const params = decisionParams(accountId, action, audit, evaluation)
          const next = evaluation.verdict === "allow" ? evaluation.next : undefined
          let text: string
          if (next === undefined) {
            text = BLOCK
            params.push(known?.version ?? null)
          } else if (known === undefined) {
            text = ALLOW_NEW
            params.push(String(action.proposedUsd ?? 0), action.proposedTokens ?? 0, JSON.stringify(next.recent))
          } else {
            text = ALLOW_EXISTING
            params.push(known.version, String(action.proposedUsd ?? 0), action.proposedTokens ?? 0, lastRecord(next))
          }
          params.push(liveKey)
          const row = (yield* run<WriteResult>(text, params))[0]
          if (row?.written) {
            if (next !== undefined) {
              remember(key, { run: { spentUsd: row.spent_usd!, tokens: row.tokens!, recent: next.recent }, version: row.version! })
            }
            return evaluation
          }
          known = row === undefined
            ? undefined
            : { run: { spentUsd: row.spent_usd!, tokens: row.tokens!, recent: row.recent ?? [] }, version: row.version! }
          remember(key, known)
        }
        return undefined
      })

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

    /**
     * Locked path: the run's row lock held for the transaction (holds to read, open or consume). The record is
     * written last; if a fail-closed block took this decision's id meanwhile, the whole transaction is undone.
     */
    const decideLocked = (...[accountId, action, list, audit, liveKey]: DecisionArgs) =>
      Effect.gen(function*() {
        remember(runKey(accountId, action.runId), undefined)
        // The upsert takes the run's row lock for the transaction: concurrent checks of a run queue here.
        const rows = yield* sql<{ spent_usd: number; tokens: number; recent: RunState["recent"] }>`
          INSERT INTO enforcement_runs (account_id, run_id) VALUES (${accountId}, ${action.runId})
          ON CONFLICT (account_id, run_id) DO UPDATE SET updated_at = now()
          RETURNING spent_usd::float8 AS spent_usd, tokens::float8 AS tokens, recent`
        const row = rows[0]
        const run: RunState = row ? { spentUsd: row.spent_usd, tokens: row.tokens, recent: row.recent } : EMPTY_RUN
        const needsHolds = list.some((p) => needsApproval(p, action))
        const holds = needsHolds ? yield* holdsFor(accountId, action) : NO_HOLDS
        const now = Date.now()
        let evaluation = evaluate(list, action, run, holds, now)
        if (evaluation.verdict === "allow" && evaluation.next) {
          yield* sql`
            UPDATE enforcement_runs SET spent_usd = spent_usd + ${String(action.proposedUsd ?? 0)}::numeric,
                   tokens = tokens + ${action.proposedTokens ?? 0}, recent = ${JSON.stringify(evaluation.next.recent)}::jsonb
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
        // Last, so that a key revoked meanwhile (see `answer`) undoes the whole transaction.
        const recorded = yield* sql.unsafe(
          `INSERT INTO enforcement_decisions ${DECISION_COLUMNS} SELECT ${DECISION_VALUES}
           WHERE tapedeck_require_live_key($14::text) ON CONFLICT (id) DO NOTHING RETURNING id`,
          [...decisionParams(accountId, action, audit, evaluation), liveKey]
        )
        if (recorded.length === 0) return yield* new PolicyStateUnavailable({ reason: "answered before the decision was stored" })
        return evaluation
      }).pipe(sql.withTransaction)

    const decideAtomically = (...[accountId, action, list, audit, liveKey]: DecisionArgs) =>
      list.some((p) => needsApproval(p, action))
        ? orUnavailableOrRevoked(decideLocked(accountId, action, list, audit, liveKey))
        : Effect.flatMap(
          decideOptimistically(accountId, action, list, audit, liveKey),
          (evaluation) =>
            evaluation ? Effect.succeed(evaluation) : orUnavailableOrRevoked(decideLocked(accountId, action, list, audit, liveKey))
        )

    /** `recent` without the last action that matches this one (the one an allow being taken back added). */
    const withoutAction = (recent: ReadonlyArray<ActionRecord>, action: ProposedAction) => {
      for (let i = recent.length - 1; i >= 0; i--) {
        const r = recent[i]!
        if (r.tool === (action.toolName ?? null) && r.args === (action.toolArgsHash ?? null) && r.step === (action.stepIndex ?? null)) {
          return [...recent.slice(0, i), ...recent.slice(i + 1)]
        }
      }
      return recent
    }

    /**
     * The runs' row locks first (in key order, as every batch takes them): an attempt still under way for one of
     * these decisions either committed before (and is seen, and taken back) or finds its run at a newer version
     * afterwards and writes nothing. Then one statement each: the allows to take back, the counters, the records.
     */
    const recordFailClosed = (records: ReadonlyArray<FailClosedRecord>) =>
      Effect.gen(function*() {
        const byId = new Map(records.map((r) => [r.audit.decisionId, r]))
        const runs = new Map<string, { account_id: AccountId; run_id: string }>()
        for (const r of byId.values()) {
          const key = runKey(r.accountId, r.action.runId)
          remember(key, undefined)
          runs.set(key, { account_id: r.accountId, run_id: r.action.runId })
        }
        const locked = yield* sql<{ account_id: string; run_id: string; recent: RunState["recent"] }>`
          INSERT INTO enforcement_runs (account_id, run_id)
          SELECT x.account_id, x.run_id FROM jsonb_to_recordset(${JSON.stringify([...runs.values()])}::jsonb)
            AS x(account_id uuid, run_id text)
          ORDER BY x.account_id, x.run_id
          ON CONFLICT (account_id, run_id) DO UPDATE SET updated_at = now()
          RETURNING account_id, run_id, recent`
        const allowed = yield* sql<{ id: string }>`
          SELECT id FROM enforcement_decisions WHERE id = ANY(${uuidArray([...byId.keys()])}::uuid[]) AND verdict = 'allow'`
        if (allowed.length > 0) {
          const recentOf = new Map(locked.map((r) => [runKey(r.account_id as AccountId, r.run_id), r.recent]))
          const takenBack = new Map<string, { account_id: string; run_id: string; usd: Array<string>; tokens: number; recent: ReadonlyArray<ActionRecord> }>()
          for (const { id } of allowed) {
            const { accountId, action } = byId.get(id)!
            const key = runKey(accountId, action.runId)
            const run = takenBack.get(key) ?? { account_id: accountId, run_id: action.runId, usd: [], tokens: 0, recent: recentOf.get(key) ?? [] }
            run.usd.push(String(action.proposedUsd ?? 0))
            run.tokens += action.proposedTokens ?? 0
            run.recent = withoutAction(run.recent, action)
            takenBack.set(key, run)
          }
          yield* sql`
            UPDATE enforcement_runs e SET
              spent_usd = e.spent_usd - (SELECT COALESCE(sum(v::numeric), 0) FROM jsonb_array_elements_text(x.usd) v),
              tokens = e.tokens - x.tokens, recent = x.recent
            FROM jsonb_to_recordset(${JSON.stringify([...takenBack.values()])}::jsonb)
              AS x(account_id uuid, run_id text, usd jsonb, tokens bigint, recent jsonb)
            WHERE e.account_id = x.account_id AND e.run_id = x.run_id`
        }
        const rows = [...byId.values()].map((r) => ({
          id: r.audit.decisionId,
          account_id: r.accountId,
          run_id: r.action.runId,
          trace_id: r.audit.traceId ?? null,
          step_index: r.action.stepIndex ?? null,
          tool_name: r.action.toolName ?? null,
          model: r.action.model ?? null,
          reason: r.reason,
          latency_ms: r.latencyMs
        }))
        yield* sql`
          INSERT INTO enforcement_decisions ${sql.literal(DECISION_COLUMNS)}
          SELECT x.id, x.account_id, x.run_id, x.trace_id, x.step_index, x.tool_name, x.model, 'block', NULL, NULL, NULL,
                 x.reason, x.latency_ms + 1000 * extract(epoch FROM clock_timestamp() - statement_timestamp())::float8
          FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
            AS x(id uuid, account_id uuid, run_id text, trace_id uuid, step_index bigint, tool_name text, model text,
                 reason text, latency_ms float8)
          ON CONFLICT (id) DO UPDATE SET verdict = EXCLUDED.verdict, policy_id = NULL, policy_type = NULL, hold_id = NULL,
                                         reason = EXCLUDED.reason, latency_ms = EXCLUDED.latency_ms`
      }).pipe(sql.withTransaction, orUnavailable)

    return PolicyStore.of({ policies, decideAtomically, recordFailClosed, invalidate })
  })
)
