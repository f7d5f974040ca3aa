import { Context, type Effect } from "effect"
import type { PolicyStateUnavailable } from "#src/domain/Enforcement"
import type { Policy } from "#src/domain/Guardrail"
import type { AccountId } from "#src/domain/Ids"
import type { Evaluation, ProposedAction } from "#src/domain/PolicyEvaluation"

/**
 * Where policy state lives: the account's policies and each run's counters and holds. Every failure to
 * reach that state is a `PolicyStateUnavailable` (never a default): the caller fails closed.
 */
export class PolicyStore extends Context.Tag("tapedeck/PolicyStore")<PolicyStore, {
  /** The account's policies in creation order (cached; invalidated on change, on every instance). */
  readonly policies: (accountId: AccountId) => Effect.Effect<ReadonlyArray<Policy>, PolicyStateUnavailable>
  /**
   * Evaluates the action with the run's counters locked and stores the outcome in the same transaction:
   * counters advance only on allow, a hold is opened or consumed as the evaluation says.
   */
  readonly decideAtomically: (
    accountId: AccountId,
    action: ProposedAction,
    policies: ReadonlyArray<Policy>
  ) => Effect.Effect<Evaluation, PolicyStateUnavailable>
  /** Forgets the cached policies of the account here and on the other instances. */
  readonly invalidate: (accountId: AccountId) => Effect.Effect<void>
}>() {}
