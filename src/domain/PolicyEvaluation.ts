import type { Policy } from "./Guardrail.ts"

/** What an agent is about to do (the enforcement check request, camelCased). */
export interface ProposedAction {
  readonly runId: string
  readonly projectId?: string | undefined
  readonly toolName?: string | undefined
  readonly toolArgsHash?: string | undefined
  readonly model?: string | undefined
  readonly proposedTokens?: number | undefined
  readonly proposedUsd?: number | undefined
  readonly stepIndex?: number | undefined
}

/** One allowed action remembered for the loop breaker and the rate policy. */
export interface ActionRecord {
  readonly tool: string | null
  readonly args: string | null
  readonly step: number | null
  readonly atMs: number
}

/** A run's counters: they count allowed actions only, and survive restarts (stored per run). */
export interface RunState {
  readonly spentUsd: number
  readonly tokens: number
  readonly recent: ReadonlyArray<ActionRecord>
}

export const EMPTY_RUN: RunState = { spentUsd: 0, tokens: 0, recent: [] }

/** The approval state of this exact action (same run, tool and args hash) under a require_approval policy. */
export interface HoldState {
  readonly id: string
  readonly policyId: string
  readonly status: "pending" | "approved" | "denied"
  readonly reason: string | null
  readonly expiresAtMs: number | null
  readonly consumed: boolean
}

export type Verdict = "allow" | "block" | "hold"

/**
 * What an installed guardrail type's evaluator answered for one policy of its type, worked out before the decision
 * (layers/enforcement/GuardrailTypes): allow (no objection), block, or hold for a person's approval.
 */
export type CustomOutcome =
  | { readonly verdict: "allow" }
  | { readonly verdict: "block"; readonly reason: string }
  | { readonly verdict: "hold"; readonly reason: string; readonly expiresInSeconds: number | null }

/** Per policy id, the outcomes of the policies of installed types that apply to the check. */
export type CustomOutcomes = ReadonlyMap<string, CustomOutcome>

const NO_CUSTOM: CustomOutcomes = new Map()

/** Whether an installed type's policy asks for a hold (the decision then reads and opens holds, as for approvals). */
export const needsCustomHold = (custom: CustomOutcomes | undefined) => {
  if (custom === undefined) return false
  for (const outcome of custom.values()) if (outcome.verdict === "hold") return true
  return false
}

export interface Evaluation {
  readonly verdict: Verdict
  readonly policy: { readonly id: string; readonly type: string } | null
  readonly reason: string
  /** On allow: the run's counters after this action. */
  readonly next?: RunState
  /** On hold without a live hold: a hold to open for this policy. */
  readonly openHold?: { readonly policyId: string; readonly expiresInSeconds: number | null }
  /** On allow through holds approved "once": the holds that are now used up. */
  readonly consumeHolds?: ReadonlyArray<string>
  /** The hold the decision is about (hold or a decided one). */
  readonly holdId?: string
}

/**
 * How many allowed actions a run remembers for the loop breaker and the rate policy. The schemas cap
 * `max_repeats` and `max_calls` at 1000, so a loop or a rate is seen even with several other calls interleaved.
 */
export const MAX_RECENT = 5000

const WILDCARD = /[*?]/
const SURROGATE = /[\uD800-\uDFFF]/

/**
 * Glob match: `*` any run of characters, `?` one character (code point), everything else literal; case-sensitive.
 * Patterns are user input, so this is the linear-backtracking wildcard matcher (O(pattern × value) at worst),
 * never a RegExp: `^.*a.*a….*b$` backtracks exponentially and would freeze the event loop.
 */
export const globMatch = (pattern: string, value: string) => {
  // Checks match tools and models against every pattern of every policy: skip the work where it cannot matter.
  if (!WILDCARD.test(pattern)) return pattern === value
  // Without surrogate pairs a code unit is a code point: index the strings as they are.
  const p = SURROGATE.test(pattern) ? Array.from(pattern) : pattern
  const v = SURROGATE.test(value) ? Array.from(value) : value
  let i = 0
  let j = 0
  let star = -1
  let resume = 0
  while (j < v.length) {
    if (i < p.length && p[i] !== "*" && (p[i] === "?" || p[i] === v[j])) {
      i++
      j++
    } else if (i < p.length && p[i] === "*") {
      star = i++
      resume = j
    } else if (star >= 0) {
      // Let the last `*` absorb one more character and retry from just after it.
      i = star + 1
      j = ++resume
    } else {
      return false
    }
  }
  while (i < p.length && p[i] === "*") i++
  return i === p.length
}

const anyMatch = (patterns: unknown, value: string) =>
  Array.isArray(patterns) && patterns.some((p) => typeof p === "string" && globMatch(p, value))

/** Whether a require_approval policy is about this action (so its holds must be looked up). */
export const needsApproval = (policy: Policy, action: ProposedAction) =>
  policy.enabled &&
  policy.type === "require_approval" &&
  (policy.projectId === null || policy.projectId === action.projectId) &&
  ((action.toolName !== undefined && anyMatch(policy.params.tool_patterns, action.toolName)) ||
    (action.model !== undefined && anyMatch(policy.params.model_patterns, action.model)))

const money = (n: number) => `$${Number(n.toFixed(6))}`
/** Whole micro-dollars: budgets compare in them, so 0.1 + 0.2 lands exactly on 0.3. */
const micros = (usd: number) => Math.round(usd * 1e6)

/** A numeric parameter, or undefined when the stored policy is malformed (which then blocks: fail closed). */
const param = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined)

type Outcome =
  | { readonly verdict: "block"; readonly reason: string; readonly holdId?: string }
  | { readonly verdict: "hold"; readonly reason: string; readonly holdId?: string; readonly open?: number | null }
  | { readonly verdict: "allow"; readonly consume?: string }
  | undefined

/** One policy's opinion of the action; undefined when the policy does not apply. */
const judge = (
  policy: Policy,
  action: ProposedAction,
  run: RunState,
  holds: ReadonlyMap<string, HoldState>,
  nowMs: number,
  custom: CustomOutcomes
): Outcome => {
  const p = policy.params
  // Built only when returned: every check judges every policy, and few are misconfigured.
  const misconfigured = () => ({
    verdict: "block" as const,
    reason: `policy ${policy.id} (${policy.type}) has invalid parameters`
  })
  switch (policy.type) {
    case "budget_usd": {
      const max = param(p.max_usd)
      if (max === undefined) return misconfigured()
      const total = run.spentUsd + (action.proposedUsd ?? 0)
      return micros(total) > micros(max)
        ? { verdict: "block", reason: `the run would spend ${money(total)}, over its budget of ${money(max)}` }
        : undefined
    }
    case "token_budget": {
      const max = param(p.max_tokens)
      if (max === undefined) return misconfigured()
      const proposed = action.proposedTokens ?? 0
      return run.tokens + proposed > max
        ? { verdict: "block", reason: `the run would use ${run.tokens + proposed} tokens, over its budget of ${max}` }
        : undefined
    }
    case "max_steps": {
      const max = param(p.max_steps)
      if (max === undefined) return misconfigured()
      return action.stepIndex !== undefined && action.stepIndex >= max
        ? { verdict: "block", reason: `step ${action.stepIndex} is past the run's limit of ${max} steps` }
        : undefined
    }
    case "tool_denylist":
      return action.toolName !== undefined && anyMatch(p.patterns, action.toolName)
        ? { verdict: "block", reason: `tool '${action.toolName}' is on the deny list` }
        : undefined
    case "tool_allowlist":
      return action.toolName !== undefined && !anyMatch(p.patterns, action.toolName)
        ? { verdict: "block", reason: `tool '${action.toolName}' is not on the allow list` }
        : undefined
    case "model_allowlist":
      return action.model !== undefined && !anyMatch(p.patterns, action.model)
        ? { verdict: "block", reason: `model '${action.model}' is not on the allow list` }
        : undefined
    case "loop_breaker": {
      if (action.toolName === undefined) return undefined
      const max = param(p.max_repeats)
      const window = p.window_steps === undefined ? undefined : param(p.window_steps)
      if (max === undefined || (p.window_steps !== undefined && window === undefined)) return misconfigured()
      const seen = run.recent.filter(
        (r) =>
          r.tool === action.toolName &&
          r.args === (action.toolArgsHash ?? null) &&
          (window === undefined ||
            action.stepIndex === undefined ||
            r.step === null ||
            action.stepIndex - r.step < window)
      ).length
      return seen >= max
        ? {
            verdict: "block",
            reason: `tool '${action.toolName}' was already called ${seen} times with the same arguments in this run (limit ${max})`
          }
        : undefined
    }
    case "rate": {
      const max = param(p.max_calls)
      const seconds = param(p.window_seconds)
      if (max === undefined || seconds === undefined) return misconfigured()
      const windowMs = seconds * 1000
      const recent = run.recent.filter((r) => nowMs - r.atMs < windowMs).length
      return recent >= max
        ? { verdict: "block", reason: `the run made ${recent} calls in the last ${p.window_seconds} s (limit ${max})` }
        : undefined
    }
    case "require_approval": {
      const toolMatches = action.toolName !== undefined && anyMatch(p.tool_patterns, action.toolName)
      const modelMatches = action.model !== undefined && anyMatch(p.model_patterns, action.model)
      if (!toolMatches && !modelMatches) return undefined
      const what = toolMatches ? `tool '${action.toolName}'` : `model '${action.model}'`
      const hold = holds.get(policy.id)
      const expiresIn = p.expires_in_seconds === undefined ? null : (param(p.expires_in_seconds) ?? null)
      if (hold === undefined || (hold.status === "approved" && hold.consumed)) {
        return { verdict: "hold", reason: `${what} needs a human approval`, open: expiresIn }
      }
      if (hold.status === "denied") {
        return {
          verdict: "block",
          reason: `${what} was denied${hold.reason ? `: ${hold.reason}` : ""}`,
          holdId: hold.id
        }
      }
      if (hold.status === "pending") {
        return hold.expiresAtMs !== null && hold.expiresAtMs <= nowMs
          ? { verdict: "block", reason: `the approval request for ${what} expired`, holdId: hold.id }
          : { verdict: "hold", reason: `${what} is waiting for a human approval`, holdId: hold.id }
      }
      return p.approval_scope === "run" ? { verdict: "allow" } : { verdict: "allow", consume: hold.id }
    }
    default: {
      // A type an extension installs: its evaluator already answered. A stored policy of a type no installed
      // extension provides blocks (fail closed), as a malformed built-in policy does.
      const outcome = custom.get(policy.id)
      if (outcome === undefined) {
        return {
          verdict: "block",
          reason: `policy ${policy.id} has type '${policy.type}', which no installed extension provides`
        }
      }
      if (outcome.verdict === "allow") return undefined
      if (outcome.verdict === "block") return { verdict: "block", reason: outcome.reason }
      // Holds as require_approval's: one per policy and identical action, approved once.
      const hold = holds.get(policy.id)
      if (hold === undefined || (hold.status === "approved" && hold.consumed)) {
        return { verdict: "hold", reason: outcome.reason, open: outcome.expiresInSeconds }
      }
      if (hold.status === "denied") {
        return {
          verdict: "block",
          reason: `${outcome.reason}: denied${hold.reason ? `: ${hold.reason}` : ""}`,
          holdId: hold.id
        }
      }
      if (hold.status === "pending") {
        return hold.expiresAtMs !== null && hold.expiresAtMs <= nowMs
          ? { verdict: "block", reason: `${outcome.reason}: the approval request expired`, holdId: hold.id }
          : { verdict: "hold", reason: `${outcome.reason}: waiting for a human approval`, holdId: hold.id }
      }
      return { verdict: "allow", consume: hold.id }
    }
  }
}

/**
 * Decides an action against the account's policies, pure. Policies are evaluated in creation order; the
 * first policy that blocks decides; else the first that holds; else allow. Disabled policies and policies
 * of another project are skipped. On allow the run's counters advance; on block or hold they do not.
 */
export const evaluate = (
  policies: ReadonlyArray<Policy>,
  action: ProposedAction,
  run: RunState,
  holds: ReadonlyMap<string, HoldState>,
  nowMs: number,
  custom: CustomOutcomes = NO_CUSTOM
): Evaluation => {
  let hold: Evaluation | undefined
  const consumed: Array<string> = []
  for (const policy of policies) {
    if (!policy.enabled || (policy.projectId !== null && policy.projectId !== action.projectId)) continue
    const outcome = judge(policy, action, run, holds, nowMs, custom)
    if (outcome === undefined) continue
    const named = { id: policy.id, type: policy.type }
    if (outcome.verdict === "block") {
      return {
        verdict: "block",
        policy: named,
        reason: outcome.reason,
        ...(outcome.holdId ? { holdId: outcome.holdId } : {})
      }
    }
    if (outcome.verdict === "hold") {
      hold ??= {
        verdict: "hold",
        policy: named,
        reason: outcome.reason,
        ...(outcome.holdId ? { holdId: outcome.holdId } : {}),
        ...(outcome.open !== undefined && !outcome.holdId
          ? { openHold: { policyId: policy.id, expiresInSeconds: outcome.open } }
          : {})
      }
      continue
    }
    if (outcome.consume) consumed.push(outcome.consume)
  }
  if (hold) return hold
  const record: ActionRecord = {
    tool: action.toolName ?? null,
    args: action.toolArgsHash ?? null,
    step: action.stepIndex ?? null,
    atMs: nowMs
  }
  return {
    verdict: "allow",
    policy: null,
    reason: "no policy blocks or holds this action",
    next: {
      spentUsd: run.spentUsd + (action.proposedUsd ?? 0),
      tokens: run.tokens + (action.proposedTokens ?? 0),
      recent: [...run.recent, record].slice(-MAX_RECENT)
    },
    ...(consumed.length > 0 ? { consumeHolds: consumed } : {})
  }
}
