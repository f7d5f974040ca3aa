import { Context, type Effect } from "effect"
import type { Policy } from "#src/domain/Guardrail"
import type { AccountId } from "#src/domain/Ids"
import type { CustomOutcomes, Evaluation, ProposedAction } from "#src/domain/PolicyEvaluation"
import type { CredentialRevoked, PolicyStateUnavailable } from "#src/domain/Errors"

/** What the decision record keeps beyond the action: the trace it names and when the check began. */
export interface DecisionAudit {
  /** The record's id, chosen by the caller so a fail-closed answer can take the record over (see Enforcement). */
  readonly decisionId: string
  readonly traceId: string | undefined
  /** `performance.now()` when the check began: the record's latency runs from there to the write. */
  readonly startedAt: number
  /**
   * Set by the caller once it has answered without waiting for this decision (a fail-closed block): the store
   * then starts no further attempt, so that nothing it writes later can disagree with the answer.
   */
  abandoned: boolean
  /**
   * Set by the store when a statement that may store this decision is sent. False: none was, and once `abandoned` is
   * set none will be, so a fail-closed record of it needs no run lock. Absent: taken as sent.
   */
  reachedStore?: boolean
}

/** A check answered block because its decision could not be made in time, to be recorded as such. */
export interface FailClosedRecord {
  readonly accountId: AccountId
  readonly action: ProposedAction
  readonly audit: DecisionAudit
  readonly reason: string
  /** From the check's start to the answer (the record keeps the latency of the answer given). */
  readonly latencyMs: number
}

/**
 * Where policy state lives: the account's policies and each run's counters and holds. Every failure to
 * reach that state is a `PolicyStateUnavailable` (never a default): the caller fails closed.
 */
export class PolicyStore extends Context.Tag("tapedeck/PolicyStore")<
  PolicyStore,
  {
    /** The account's policies in creation order (cached; invalidated on change, on every instance). */
    readonly policies: (accountId: AccountId) => Effect.Effect<ReadonlyArray<Policy>, PolicyStateUnavailable>
    /**
     * Evaluates the action against the run's counters and stores the outcome atomically with the decision's
     * record: counters advance only on allow, a hold is opened or consumed as the evaluation says. `liveKey`: the
     * digest of the API key the caller was verified with from a cache (null: verified just now); if that key has been
     * revoked since, nothing is stored and the result is CredentialRevoked. `custom`: what the evaluators of installed
     * guardrail types answered for the policies of their types (see GuardrailTypes).
     */
    readonly decideAtomically: (
      accountId: AccountId,
      action: ProposedAction,
      policies: ReadonlyArray<Policy>,
      audit: DecisionAudit,
      liveKey: string | null,
      custom?: CustomOutcomes
    ) => Effect.Effect<Evaluation, PolicyStateUnavailable | CredentialRevoked>
    /**
     * `decideAtomically` without an Effect of its own, for the hot path: when the account's policies are cached and
     * the decision can be batched (no hold to read or open), takes the check and returns true; `resume` is later called
     * with the outcome, once (or more often: the caller keeps the first). False: nothing was taken, use
     * `decideAtomically`. Optional: a store without it is always asked through `decideAtomically`.
     */
    readonly submit?: (
      accountId: AccountId,
      action: ProposedAction,
      audit: DecisionAudit,
      liveKey: string | null,
      resume: (outcome: Effect.Effect<Evaluation, PolicyStateUnavailable | CredentialRevoked>) => void
    ) => boolean
    /**
     * Records fail-closed blocks, each as the decision `audit.decisionId`, whatever became of the attempt to decide
     * it: if that attempt stored an allow after all, the allow is replaced and its counters are taken back, and no
     * attempt still under way can store anything afterwards. All or none; idempotent: the caller retries until it
     * succeeds.
     */
    readonly recordFailClosed: (records: ReadonlyArray<FailClosedRecord>) => Effect.Effect<void, PolicyStateUnavailable>
    /** Forgets the cached policies of the account here and on the other instances. */
    readonly invalidate: (accountId: AccountId) => Effect.Effect<void>
  }
>() {}
