import { SqlClient, SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Layer, Option, Runtime, Stream } from "effect"
import type { Policy } from "#src/domain/Guardrail"
import type { AccountId } from "#src/domain/Ids"
import {
  type ActionRecord,
  type CustomOutcomes,
  EMPTY_RUN,
  evaluate,
  type Evaluation,
  type HoldState,
  MAX_RECENT,
  needsApproval,
  needsCustomHold,
  type ProposedAction,
  type RunState
} from "#src/domain/PolicyEvaluation"
import { AppConfig } from "../config/AppConfig.ts"
import { makeCheckBatcher } from "./CheckBatcher.ts"
import { CheckPressure } from "./CheckPressure.ts"
import { EnforcementSqlLive } from "./EnforcementSql.ts"
import { type DecisionAudit, type FailClosedRecord, PolicyStore } from "./PolicyStore.ts"
import { isKeyRevoked } from "../storage/ApiKeyRepo.ts"
import { prepared } from "../storage/PreparedStatements.ts"
import { uuidArray } from "../storage/SqlArrays.ts"
import { CredentialRevoked, PolicyStateUnavailable } from "#src/domain/Errors"

const CHANNEL = "tapedeck_guardrails"
/** A safety net for a missed notification: cached policies are reloaded at least this often. */
const CACHE_TTL_MS = 30_000
/** Runs whose last known state this instance keeps (least recently used out first), and their recent actions in all. */
const MAX_CACHED_RUNS = 10_000
const MAX_CACHED_RECENT = 200_000
/**
 * Batches a check may be part of before it takes the run's lock instead. Checks of one instance never conflict with
 * each other (CheckBatcher): only a write by another instance (or a fail-closed record) sends a check round again.
 */
const OPTIMISTIC_ATTEMPTS = 4
/** How long a run other instances write at the same time stays contended (its batches locked) after a sign of that. */
const CONTENDED_MS = 5_000
/** Checks per batch statement at most, and waiting at most (past it a check fails closed at once). */
const MAX_BATCH = 256
const MAX_QUEUED = 50_000
/** Checks one account may have waiting: its flood fails its own excess closed, not other accounts' checks. */
const MAX_QUEUED_PER_ACCOUNT = 5_000

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
    Effect.catchAllDefect((defect) =>
      defect instanceof SqlError.SqlError ? Effect.fail(unavailable(defect)) : Effect.die(defect)
    )
  )

/** As `orUnavailable`, but a statement that found the caller's API key revoked (migration 0014) is CredentialRevoked. */
const orUnavailableOrRevoked = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, PolicyStateUnavailable | CredentialRevoked, R> =>
  effect.pipe(
    Effect.mapError((e): PolicyStateUnavailable | CredentialRevoked =>
      e instanceof PolicyStateUnavailable || e instanceof CredentialRevoked
        ? e
        : isKeyRevoked(e)
          ? new CredentialRevoked()
          : unavailable(e)
    ),
    Effect.catchAllDefect(
      (defect): Effect.Effect<never, PolicyStateUnavailable | CredentialRevoked> =>
        isKeyRevoked(defect)
          ? Effect.fail(new CredentialRevoked())
          : defect instanceof SqlError.SqlError
            ? Effect.fail(unavailable(defect))
            : Effect.die(defect)
    )
  )

interface PolicyRow {
  readonly id: string
  readonly type: string
  readonly project_id: string | null
  readonly enabled: boolean
  readonly params: Record<string, unknown>
  readonly created_at: Date
}

/** A run as this instance last saw it: its counters and the row version (`xmin`) they belong to. */
interface KnownRun {
  readonly run: RunState
  readonly version: string
  /**
   * The run's `actions` and `taken_back` counters at that version, when known: a locked batch then reads only the
   * actions added since (tapedeck_lock_runs). Unknown (null) when the version came from a write that found the run
   * moved on (that answer does not carry them).
   */
  readonly actions: number | null
  readonly takenBack: number | null
}

/**
 * What the batch statement answers per run: `written` with the row's new counters and version; or not written, with
 * the row as it is now (no row for a run of the batch: not written, and the run does not exist). A single row with
 * `revoked` set instead: some of the batch's API keys were revoked, nothing was written.
 */
interface BatchRow {
  readonly account_id: string | null
  readonly run_id: string | null
  readonly written: boolean
  readonly spent_usd: number | null
  readonly tokens: number | null
  readonly recent: ReadonlyArray<ActionRecord> | null
  readonly version: string | null
  readonly revoked: ReadonlyArray<string> | null
}

// ---------------------------------------------------------------------------------------------- statements
//
// Checks that no approval policy concerns are written in batches, one statement each (migration 0020's function, so
// PostgreSQL plans it once per connection); the locked path (holds) is a transaction of a few statements.

const DECISION_COLUMNS =
  "(id, account_id, run_id, trace_id, step_index, tool_name, model, verdict, policy_id, policy_type, hold_id, reason, latency_ms)"
/**
 * The latency recorded: from the check's start to its statement being sent ($13), plus the statement's own time in
 * PostgreSQL up to this row. Waiting for a free connection in this process and the commit are not in it.
 */
const DECISION_VALUES = `$3::uuid, $1::uuid, $2::text, $4::uuid, $5::bigint, $6::text, $7::text, $8::text, $9::uuid,
  $10::text, $11::uuid, $12::text,
  $13::float8 + 1000 * extract(epoch FROM clock_timestamp() - statement_timestamp())::float8`

/**
 * A batch: $1 the runs (each with the version its checks were evaluated against and what its allows add), $2 the
 * decisions, $3 the API keys the checks were verified with from a cache, $4 how many actions a run remembers.
 */
const BATCH = `${prepared("check_batch")} SELECT * FROM tapedeck_check_batch($1::text::jsonb, $2::text::jsonb,
  ARRAY(SELECT jsonb_array_elements_text($3::text::jsonb)), $4::int)`

/** A run's row as a locked batch found it, once locked (`recent` only if its version is not the one given). */
interface LockedRow {
  readonly account_id: string
  readonly run_id: string
  readonly spent_usd: number
  readonly tokens: number
  readonly version: string
  readonly actions: number
  readonly taken_back: number
  /** Null: the version given. Else the actions added since the `actions` given, or all of them if `full_recent`. */
  readonly recent: ReadonlyArray<ActionRecord> | null
  readonly full_recent: boolean
}

/**
 * A locked batch's first statement: $1 its runs (each with the version, `actions` and `taken_back` last seen), $2
 * how many actions a run remembers.
 */
const LOCK_RUNS = `${prepared("lock_runs")} SELECT account_id, run_id, spent_usd, tokens, version,
  actions::float8 AS actions, taken_back::float8 AS taken_back, recent, full_recent
  FROM tapedeck_lock_runs($1::text::jsonb, $2::int)`

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
  liveKey: string | null,
  custom?: CustomOutcomes
]

/**
 * Policy state in PostgreSQL: policies cached per account; checks queued per instance and written in batches, each
 * run's counters conditional on the run's version (CheckBatcher, migration 0020), or under the runs' row locks for
 * runs other instances write too (migration 0050), over enforcement's own connections (EnforcementSqlLive).
 */
export const SqlPolicyStoreLive = Layer.scoped(
  PolicyStore,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    const config = yield* AppConfig
    const pressure = yield* CheckPressure
    const batchRun: Run = (text, params) => orUnavailableOrRevoked(sql.unsafe<any>(text, params))

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
          rows.map(
            (r): Policy => ({
              id: r.id,
              type: r.type,
              projectId: r.project_id,
              enabled: r.enabled,
              params: r.params,
              createdAt: r.created_at.toISOString()
            })
          )
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
        Effect.zipRight(
          Option.isSome(pg) ? Effect.asVoid(sql`SELECT pg_notify(${CHANNEL}, ${accountId})`) : Effect.void
        ),
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

    const notStored = () => new PolicyStateUnavailable({ reason: "answered before the decision was stored" })

    const holdsFor = (accountId: AccountId, action: ProposedAction) =>
      sql<{
        id: string
        policy_id: string
        status: HoldState["status"]
        reason: string | null
        expires_at: Date | null
        consumed: boolean
      }>`
        SELECT DISTINCT ON (policy_id) id, policy_id, status, reason, expires_at, consumed
        FROM enforcement_holds
        WHERE account_id = ${accountId} AND run_id = ${action.runId}
          AND tool_name IS NOT DISTINCT FROM ${action.toolName ?? null}
          AND tool_args_hash IS NOT DISTINCT FROM ${action.toolArgsHash ?? null}
          AND model IS NOT DISTINCT FROM ${action.model ?? null}
        ORDER BY policy_id, created_at DESC`.pipe(
        Effect.map(
          (rows) =>
            new Map(
              rows.map((r) => [
                r.policy_id,
                {
                  id: r.id,
                  policyId: r.policy_id,
                  status: r.status,
                  reason: r.reason,
                  expiresAtMs: r.expires_at === null ? null : r.expires_at.getTime(),
                  consumed: r.consumed
                } satisfies HoldState
              ])
            )
        )
      )

    /**
     * Locked path: the run's row lock held for the transaction (holds to read, open or consume). The record is
     * written last; if a fail-closed block took this decision's id meanwhile, the whole transaction is undone.
     */
    const decideLocked = (...[accountId, action, list, audit, liveKey, custom]: DecisionArgs) =>
      Effect.gen(function* () {
        // Checked and marked in one step: a check answered before this point is recorded without a run lock.
        if (audit.abandoned) return yield* notStored()
        audit.reachedStore = true
        remember(runKey(accountId, action.runId), undefined)
        // The upsert takes the run's row lock for the transaction: concurrent checks of a run queue here.
        const rows = yield* sql<{ spent_usd: number; tokens: number; recent: RunState["recent"] }>`
          INSERT INTO enforcement_runs (account_id, run_id) VALUES (${accountId}, ${action.runId})
          ON CONFLICT (account_id, run_id) DO UPDATE SET updated_at = now()
          RETURNING spent_usd::float8 AS spent_usd, tokens::float8 AS tokens,
                    tapedeck_run_recent(account_id, run_id, ${MAX_RECENT}) AS recent`
        const row = rows[0]
        const run: RunState = row ? { spentUsd: row.spent_usd, tokens: row.tokens, recent: row.recent } : EMPTY_RUN
        const needsHolds = needsCustomHold(custom) || list.some((p) => needsApproval(p, action))
        const holds = needsHolds ? yield* holdsFor(accountId, action) : NO_HOLDS
        const now = Date.now()
        let evaluation = evaluate(list, action, run, holds, now, custom)
        if (evaluation.verdict === "allow" && evaluation.next) {
          const added = { ...evaluation.next.recent[evaluation.next.recent.length - 1]!, id: audit.decisionId }
          yield* sql`
            WITH r AS (
              UPDATE enforcement_runs SET spent_usd = spent_usd + ${String(action.proposedUsd ?? 0)}::numeric,
                     tokens = tokens + ${action.proposedTokens ?? 0}, actions = actions + 1
              WHERE account_id = ${accountId} AND run_id = ${action.runId}
              RETURNING actions)
            SELECT tapedeck_run_actions_add(${accountId}, ${action.runId}, r.actions - 1,
                                            ${JSON.stringify([added])}::jsonb, ${MAX_RECENT}) FROM r`
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
        if (recorded.length === 0)
          return yield* new PolicyStateUnavailable({ reason: "answered before the decision was stored" })
        return evaluation
      }).pipe(sql.withTransaction)

    // ---------------------------------------------------------------------------------------- batched checks

    /** A check waiting for its batch. `resume` answers the caller (once: `settled`). */
    interface Pending {
      readonly runKey: string
      readonly accountKey: string
      readonly args: DecisionArgs
      attempts: number
      settled: boolean
      readonly resume: (answer: Effect.Effect<Evaluation, PolicyStateUnavailable | CredentialRevoked>) => void
    }
    const answer = (item: Pending, result: Effect.Effect<Evaluation, PolicyStateUnavailable | CredentialRevoked>) => {
      if (item.settled) return
      item.settled = true
      item.resume(result)
    }

    /** One run's part of a batch: its checks evaluated in order, each against the counters the ones before left. */
    interface RunPart {
      readonly accountId: AccountId
      readonly runId: string
      readonly version: string | null
      /** The run's counters the checks were evaluated against (see KnownRun): a new run's are 0. */
      readonly actions: number | null
      readonly takenBack: number | null
      state: RunState
      readonly usd: Array<string>
      tokens: number
      /** The actions its allows add, each with its decision's id. */
      readonly append: Array<ActionRecord & { readonly id: string }>
      readonly decided: Array<{ readonly item: Pending; readonly evaluation: Evaluation }>
    }

    /**
     * Runs other instances write at the same time as this one, until when: their batches take the runs' locks
     * before they evaluate (`writeLocked`), instead of racing the other instance for the row's version. A run is
     * contended when its checks find it moved on a second time in a row, or a locked batch finds it held elsewhere;
     * it goes back to optimistic writes CONTENDED_MS later, and comes back if it races again.
     */
    const contended = new Map<string, number>()
    const markContended = (key: string) => {
      contended.delete(key)
      contended.set(key, performance.now() + CONTENDED_MS)
      if (contended.size > MAX_CACHED_RUNS) contended.delete(contended.keys().next().value!)
    }
    const isContended = (key: string, at: number) => {
      const until = contended.get(key)
      if (until === undefined) return false
      if (until > at) return true
      contended.delete(key)
      return false
    }

    /**
     * Evaluates a batch's checks against the runs as last seen, each run's checks in order (each against the counters
     * the ones before it left): the batch statement's parameters and, per run, what it decided.
     */
    const evaluateBatch = (batch: ReadonlyArray<Pending>) => {
      const now = Date.now()
      const parts = new Map<string, RunPart>()
      const decisions: Array<Record<string, unknown>> = []
      const keys = new Set<string>()
      for (const item of batch) {
        const [accountId, action, list, audit, liveKey] = item.args
        audit.reachedStore = true
        let part = parts.get(item.runKey)
        if (part === undefined) {
          const known = runs.get(item.runKey)
          part = {
            accountId,
            runId: action.runId,
            version: known?.version ?? null,
            actions: known === undefined ? 0 : known.actions,
            takenBack: known === undefined ? 0 : known.takenBack,
            state: known?.run ?? EMPTY_RUN,
            usd: [],
            tokens: 0,
            append: [],
            decided: []
          }
          parts.set(item.runKey, part)
        }
        const evaluation = evaluate(list, action, part.state, NO_HOLDS, now, item.args[5])
        if (evaluation.verdict === "allow" && evaluation.next !== undefined) {
          part.state = evaluation.next
          part.usd.push(String(action.proposedUsd ?? 0))
          part.tokens += action.proposedTokens ?? 0
          // Named by its decision: a fail-closed record of it takes exactly this action back.
          part.append.push({ ...evaluation.next.recent[evaluation.next.recent.length - 1]!, id: audit.decisionId })
        }
        part.decided.push({ item, evaluation })
        if (liveKey !== null) keys.add(liveKey)
        decisions.push({
          id: audit.decisionId,
          account_id: accountId,
          run_id: action.runId,
          trace_id: audit.traceId ?? null,
          step_index: action.stepIndex ?? null,
          tool_name: action.toolName ?? null,
          model: action.model ?? null,
          verdict: evaluation.verdict,
          policy_id: evaluation.policy?.id ?? null,
          policy_type: evaluation.policy?.type ?? null,
          hold_id: evaluation.holdId ?? null,
          reason: evaluation.reason,
          latency_ms: performance.now() - audit.startedAt
        })
      }
      const runsParam = [...parts.values()].map((p) => ({
        account_id: p.accountId,
        run_id: p.runId,
        version: p.version,
        usd: p.usd,
        tokens: p.tokens,
        append: p.append
      }))
      const params = [JSON.stringify(runsParam), JSON.stringify(decisions), JSON.stringify([...keys]), MAX_RECENT]
      return { parts, params }
    }

    /**
     * Settles a batch by what its statement answered: the checks of written runs are answered; those of runs
     * another instance wrote meanwhile go round again against the state the statement answered (or take the run's
     * lock after OPTIMISTIC_ATTEMPTS), their runs contended if that was already their second round; `requeue`
     * (checks of runs a locked batch found held elsewhere) go round again as they are.
     */
    const settleBatch = (
      batch: ReadonlyArray<Pending>,
      parts: ReadonlyMap<string, RunPart>,
      rows: ReadonlyArray<BatchRow>,
      done: (again: ReadonlyArray<Pending>) => void,
      requeue: ReadonlyArray<Pending> = []
    ) => {
      const again: Array<Pending> = [...requeue]
      const revoked = rows[0]?.revoked
      if (revoked) {
        // Nothing was written: the checks of revoked keys are refused, the others decided again without them.
        const dead = new Set(revoked)
        const refused: Array<Pending> = []
        for (const item of batch) {
          if (item.args[4] !== null && dead.has(item.args[4])) refused.push(item)
          else again.push(item)
        }
        done(again)
        for (const item of refused) answer(item, Effect.fail(new CredentialRevoked()))
        return
      }
      const byRun = new Map(rows.map((r) => [runKey(r.account_id as AccountId, r.run_id!), r]))
      const answers: Array<[Pending, Effect.Effect<Evaluation, PolicyStateUnavailable | CredentialRevoked>]> = []
      for (const [key, part] of parts) {
        const row = byRun.get(key)
        if (row?.written) {
          remember(key, {
            run: { spentUsd: row.spent_usd!, tokens: row.tokens!, recent: part.state.recent },
            version: row.version!,
            actions: part.actions === null ? null : part.actions + part.append.length,
            takenBack: part.takenBack
          })
          // As an Exit: Enforcement answers a decision already made without running it (its hot path).
          for (const { evaluation, item } of part.decided) answers.push([item, Exit.succeed(evaluation)])
          continue
        }
        // Found moved on again after a round against what the statement answered: another instance keeps writing
        // it. (Once is only a stale copy, which the next round settles at less cost than a locked batch.)
        if (part.decided.some(({ item }) => item.attempts > 0)) markContended(key)
        remember(
          key,
          row === undefined
            ? undefined
            : {
                run: { spentUsd: row.spent_usd!, tokens: row.tokens!, recent: row.recent ?? [] },
                version: row.version!,
                actions: null,
                takenBack: null
              }
        )
        for (const { item } of part.decided) {
          item.attempts++
          if (item.args[3].abandoned) answers.push([item, Effect.fail(notStored())])
          else if (item.attempts >= OPTIMISTIC_ATTEMPTS)
            answers.push([item, orUnavailableOrRevoked(decideLocked(...item.args))])
          else again.push(item)
        }
      }
      done(again)
      for (const [item, result] of answers) answer(item, result)
    }

    /** A batch's statement failed, or the batch did: every check of it fails closed. */
    const failBatch = (
      batch: ReadonlyArray<Pending>,
      done: (again: ReadonlyArray<Pending>) => void,
      error: PolicyStateUnavailable | CredentialRevoked
    ) =>
      Effect.sync(() => {
        done([])
        for (const item of batch) answer(item, Effect.fail(error))
      })

    /**
     * Optimistic: evaluates a batch against the runs as last seen and writes it in one statement, each run only if
     * it is still at the version its checks were evaluated against.
     */
    const writeOptimistic = (batch: ReadonlyArray<Pending>, done: (again: ReadonlyArray<Pending>) => void) =>
      Effect.suspend(() => {
        const { parts, params } = evaluateBatch(batch)
        return Effect.matchEffect(batchRun<BatchRow>(BATCH, params), {
          onFailure: (e) => failBatch(batch, done, e),
          onSuccess: (rows) => Effect.sync(() => settleBatch(batch, parts, rows, done))
        })
      })

    /**
     * Locked, for a batch with a contended run: one transaction takes the row locks of the batch's runs that no other
     * transaction holds (tapedeck_lock_runs), reads those that changed since this instance last saw them, evaluates
     * their checks against that and writes them with the same statement as an optimistic batch, which then never
     * finds a run at another version. The checks of runs held elsewhere are queued again. Checks answered fail-closed
     * while the locks were taken are left out: their records may be written without the runs' locks, as of checks
     * that never reached the store.
     */
    const writeLocked = (batch: ReadonlyArray<Pending>, done: (again: ReadonlyArray<Pending>) => void) =>
      Effect.gen(function* () {
        // What this instance knew of each run as the statement was sent (its copy may be replaced meanwhile).
        const knownAtSend = new Map<string, KnownRun | undefined>()
        const toLock: Array<Record<string, unknown>> = []
        for (const item of batch) {
          if (knownAtSend.has(item.runKey)) continue
          const known = runs.get(item.runKey)
          knownAtSend.set(item.runKey, known)
          toLock.push({
            account_id: item.args[0],
            run_id: item.args[1].runId,
            version: known?.version ?? null,
            actions: known?.actions ?? null,
            taken_back: known?.takenBack ?? null
          })
        }
        const lockedRows = yield* batchRun<LockedRow>(LOCK_RUNS, [JSON.stringify(toLock), MAX_RECENT])
        const locked = new Set<string>()
        for (const row of lockedRows) {
          const key = runKey(row.account_id as AccountId, row.run_id)
          const known = knownAtSend.get(key)
          locked.add(key)
          if (row.recent === null) {
            remember(key, known) // as this instance last saw it
            continue
          }
          const recent =
            row.full_recent || known === undefined
              ? row.recent
              : [...known.run.recent, ...row.recent].slice(-MAX_RECENT)
          remember(key, {
            run: { spentUsd: row.spent_usd, tokens: row.tokens, recent },
            version: row.version,
            actions: row.actions,
            takenBack: row.taken_back
          })
        }
        const held = batch.filter((item) => !locked.has(item.runKey))
        for (const item of held) markContended(item.runKey)
        const live = batch.filter((item) => locked.has(item.runKey) && !item.args[3].abandoned)
        const { parts, params } = evaluateBatch(live)
        const rows = live.length === 0 ? [] : yield* batchRun<BatchRow>(BATCH, params)
        return { held, live, parts, rows }
      }).pipe(
        sql.withTransaction,
        orUnavailableOrRevoked,
        Effect.matchEffect({
          onFailure: (e) => failBatch(batch, done, e),
          onSuccess: ({ held, live, parts, rows }) =>
            Effect.sync(() => {
              const left = new Set([...held, ...live])
              for (const item of batch) if (!left.has(item)) answer(item, Effect.fail(notStored()))
              settleBatch(live, parts, rows, done, held)
            })
        })
      )

    /** Writes a batch (locked if one of its runs is contended) and settles it; `done` is called exactly once. */
    const writeBatch = (
      batch: ReadonlyArray<Pending>,
      done: (again: ReadonlyArray<Pending>) => void
    ): Effect.Effect<void> =>
      Effect.suspend(() => {
        const at = performance.now()
        return batch.some((item) => isContended(item.runKey, at))
          ? writeLocked(batch, done)
          : writeOptimistic(batch, done)
      }).pipe(
        Effect.catchAllCause((cause) =>
          failBatch(batch, done, new PolicyStateUnavailable({ reason: "the check failed unexpectedly" })).pipe(
            Effect.zipRight(Effect.logError("an enforcement batch failed unexpectedly", cause))
          )
        )
      )

    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const batcher = makeCheckBatcher<Pending>({
      lanes: config.enforcementConcurrency,
      maxBatch: MAX_BATCH,
      maxQueued: MAX_QUEUED,
      maxQueuedPerAccount: MAX_QUEUED_PER_ACCOUNT,
      drop: (item) => {
        if (!item.args[3].abandoned) return false
        answer(item, Effect.fail(notStored()))
        return true
      },
      process: (batch, done) => runFork(writeBatch(batch, done)),
      // How long checks waited for a lane (not how long their statement takes, nor behind their own run) is what
      // sheds ingestion; taken as the batch is formed, before the fiber that writes it is even scheduled.
      waited: pressure.observe
    })

    /** Queues a batched check; `resume` is answered once (at once, fail-closed, when the queue is full). */
    const enqueue = (args: DecisionArgs, resume: Pending["resume"]) => {
      const item: Pending = {
        runKey: runKey(args[0], args[1].runId),
        accountKey: args[0],
        args,
        attempts: 0,
        settled: false,
        resume
      }
      const refused = batcher.submit(item)
      if (refused !== undefined) {
        const reason =
          refused === "full"
            ? `${MAX_QUEUED} checks are already waiting`
            : `${MAX_QUEUED_PER_ACCOUNT} checks of this account are already waiting`
        answer(item, Effect.fail(new PolicyStateUnavailable({ reason })))
      }
    }

    const decideAtomically = (...args: DecisionArgs) =>
      needsCustomHold(args[5]) || args[2].some((p) => needsApproval(p, args[1]))
        ? orUnavailableOrRevoked(decideLocked(...args))
        : Effect.async<Evaluation, PolicyStateUnavailable | CredentialRevoked>((resume) => enqueue(args, resume))

    const submit = (
      accountId: AccountId,
      action: ProposedAction,
      audit: DecisionAudit,
      liveKey: string | null,
      resume: Pending["resume"]
    ) => {
      const cached = cache.get(accountId)
      if (cached === undefined || Date.now() - cached.loadedAt >= CACHE_TTL_MS) return false
      if (cached.policies.some((p) => needsApproval(p, action))) return false
      enqueue([accountId, action, cached.policies, audit, liveKey], resume)
      return true
    }

    /**
     * The runs' row locks first (in key order, as every batch takes them): an attempt still under way for one of
     * these decisions either committed before (and is seen, and taken back) or finds its run at a newer version
     * afterwards and writes nothing. Then one statement each: the allows to take back, the counters, the records.
     */
    const recordFailClosed = (records: ReadonlyArray<FailClosedRecord>) =>
      Effect.suspend(() => {
        const byId = new Map(records.map((r) => [r.audit.decisionId, r]))
        // Checks answered while still waiting for their batch never reached the store: their records need no run lock
        // (taking the locks of every run they name held up the batches of those runs, under overload all of them).
        const mayBeStored = [...byId.values()].filter((r) => r.audit.reachedStore !== false)
        return mayBeStored.length === 0
          ? insertRecords(byId)
          : Effect.zipRight(takeBack(byId, mayBeStored), insertRecords(byId)).pipe(sql.withTransaction)
      }).pipe(orUnavailable)

    /** Locks the runs of records whose decisions may have been stored, and takes back the allows among them. */
    const takeBack = (byId: ReadonlyMap<string, FailClosedRecord>, mayBeStored: ReadonlyArray<FailClosedRecord>) =>
      Effect.gen(function* () {
        const runs = new Map<string, { account_id: AccountId; run_id: string }>()
        for (const r of mayBeStored) {
          const key = runKey(r.accountId, r.action.runId)
          remember(key, undefined)
          runs.set(key, { account_id: r.accountId, run_id: r.action.runId })
        }
        yield* sql`
          INSERT INTO enforcement_runs (account_id, run_id)
          SELECT x.account_id, x.run_id FROM jsonb_to_recordset(${JSON.stringify([...runs.values()])}::jsonb)
            AS x(account_id uuid, run_id text)
          ORDER BY x.account_id, x.run_id
          ON CONFLICT (account_id, run_id) DO UPDATE SET updated_at = now()`
        const allowed = yield* sql<{ id: string }>`
          SELECT id FROM enforcement_decisions
          WHERE id = ANY(${uuidArray(mayBeStored.map((r) => r.audit.decisionId))}::uuid[]) AND verdict = 'allow'`
        if (allowed.length > 0) {
          const takenBack = new Map<
            string,
            { account_id: string; run_id: string; usd: Array<string>; tokens: number }
          >()
          for (const { id } of allowed) {
            const { accountId, action } = byId.get(id)!
            const key = runKey(accountId, action.runId)
            const run = takenBack.get(key) ?? { account_id: accountId, run_id: action.runId, usd: [], tokens: 0 }
            run.usd.push(String(action.proposedUsd ?? 0))
            run.tokens += action.proposedTokens ?? 0
            takenBack.set(key, run)
          }
          yield* sql`
            UPDATE enforcement_runs e SET
              spent_usd = e.spent_usd - (SELECT COALESCE(sum(v::numeric), 0) FROM jsonb_array_elements_text(x.usd) v),
              tokens = e.tokens - x.tokens,
              taken_back = e.taken_back + 1
            FROM jsonb_to_recordset(${JSON.stringify([...takenBack.values()])}::jsonb)
              AS x(account_id uuid, run_id text, usd jsonb, tokens bigint)
            WHERE e.account_id = x.account_id AND e.run_id = x.run_id`
          // The actions those allows added (each names its decision; migration 0038).
          yield* sql`
            DELETE FROM enforcement_run_actions a
            USING jsonb_to_recordset(${JSON.stringify(
              allowed.map(({ id }) => {
                const { accountId, action } = byId.get(id)!
                return { account_id: accountId, run_id: action.runId, id }
              })
            )}::jsonb) AS x(account_id uuid, run_id text, id uuid)
            WHERE a.account_id = x.account_id AND a.run_id = x.run_id AND a.decision_id = x.id`
        }
      })

    /** The records, each taking over its decision's id (idempotent). */
    const insertRecords = (byId: ReadonlyMap<string, FailClosedRecord>) =>
      Effect.gen(function* () {
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
      })

    return PolicyStore.of({ policies, decideAtomically, submit, recordFailClosed, invalidate })
  })
).pipe(
  // Its pool connects as the shared one does, just after it: a failure there is a failure to start.
  Layer.provide(Layer.orDie(Layer.merge(EnforcementSqlLive, CheckPressure.Default)))
)
