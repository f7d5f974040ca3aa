import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"

import type { Policy, PolicyType } from "#src/domain/Guardrail"
import {
  type ActionRecord,
  EMPTY_RUN,
  type Evaluation,
  evaluate,
  globMatch,
  type HoldState,
  MAX_RECENT,
  type ProposedAction,
  type RunState
} from "#src/domain/PolicyEvaluation"

// ---------------------------------------------------------------------------------------------------------------------
// Helpers

let seq = 0
const policy = (type: PolicyType, params: Record<string, unknown>, over: Partial<Policy> = {}): Policy => ({
  id: `p${++seq}`,
  type,
  projectId: null,
  enabled: true,
  params,
  createdAt: "2025-01-01T00:00:00.000Z",
  ...over
})

const act = (a: Partial<ProposedAction> = {}): ProposedAction => ({ runId: "run-1", ...a })
const state = (spentUsd = 0, tokens = 0, recent: ReadonlyArray<ActionRecord> = []): RunState => ({
  spentUsd,
  tokens,
  recent
})
const NOW = 1_700_000_000_000
const NO_HOLDS: ReadonlyMap<string, HoldState> = new Map()

const check = (
  policies: ReadonlyArray<Policy>,
  action: ProposedAction,
  run: RunState = EMPTY_RUN,
  holds: ReadonlyMap<string, HoldState> = NO_HOLDS,
  nowMs: number = NOW
): Evaluation => evaluate(policies, action, run, holds, nowMs)

const rec = (tool: string | null, args: string | null, step: number | null, atMs = NOW - 1000): ActionRecord => ({
  tool,
  args,
  step,
  atMs
})

const expectAllow = (e: Evaluation) => {
  expect(e.verdict).toBe("allow")
  expect(e.policy).toBeNull()
  expect(typeof e.reason).toBe("string")
  expect(e.reason.length).toBeGreaterThan(0)
  expect(e.next).toBeDefined()
}

const expectBlock = (e: Evaluation, p: Policy, reason?: string) => {
  expect(e.verdict).toBe("block")
  expect(e.policy).toEqual({ id: p.id, type: p.type })
  expect(e.next).toBeUndefined()
  expect(e.consumeHolds).toBeUndefined()
  expect(e.openHold).toBeUndefined()
  if (reason !== undefined) expect(e.reason).toBe(reason)
}

/** Reference glob matcher (dynamic programming, no regular expressions): `*` any run, `?` one UTF-16 unit. */
const refGlob = (pattern: string, value: string): boolean => {
  const m = pattern.length
  const n = value.length
  let prev: Array<boolean> = Array.from({ length: n + 1 }, () => false)
  prev[0] = true
  for (let i = 1; i <= m; i++) {
    const c = pattern[i - 1]
    const cur: Array<boolean> = Array.from({ length: n + 1 }, () => false)
    if (c === "*") cur[0] = prev[0]!
    for (let j = 1; j <= n; j++) {
      if (c === "*") cur[j] = prev[j]! || cur[j - 1]!
      else if (c === "?") cur[j] = prev[j - 1]!
      else cur[j] = prev[j - 1]! && c === value[j - 1]
    }
    prev = cur
  }
  return prev[n]!
}

// ---------------------------------------------------------------------------------------------------------------------
// Policy types at their boundaries

describe("budget_usd", () => {
  const budget = policy("budget_usd", { max_usd: 10 })

  test("spending exactly the max is allowed and advances the counter", () => {
    const e = check([budget], act({ proposedUsd: 4 }), state(6))
    expectAllow(e)
    expect(e.next!.spentUsd).toBe(10)
  })

  test("one cent past the max blocks, naming both amounts in plain words", () => {
    expectBlock(
      check([budget], act({ proposedUsd: 4.01 }), state(6)),
      budget,
      "the run would spend $10.01, over its budget of $10"
    )
  })

  test("an action without proposed_usd counts as zero", () => {
    expectAllow(check([budget], act({ toolName: "x" }), state(10)))
    expectBlock(
      check([budget], act({ toolName: "x" }), state(10.5)),
      budget,
      "the run would spend $10.5, over its budget of $10"
    )
  })

  test("a budget of zero allows free actions and blocks any spend", () => {
    const zero = policy("budget_usd", { max_usd: 0 })
    expectAllow(check([zero], act({ proposedUsd: 0 })))
    expectBlock(check([zero], act({ proposedUsd: 0.01 })), zero, "the run would spend $0.01, over its budget of $0")
  })

  test("a sequence of checks allows exactly up to the budget", () => {
    let run = EMPTY_RUN
    const verdicts: Array<string> = []
    for (let i = 0; i < 5; i++) {
      const e = check([budget], act({ proposedUsd: 3 }), run)
      verdicts.push(e.verdict)
      if (e.next) run = e.next
    }
    expect(verdicts).toEqual(["allow", "allow", "allow", "block", "block"])
    expect(run.spentUsd).toBe(9)
    expectAllow(check([budget], act({ proposedUsd: 1 }), run))
  })

  // Budgets compare in whole micro-dollars: 0.1 + 0.2 lands exactly on 0.3.
  test("spending exactly the max in decimal amounts (0.1 already spent + 0.2 against 0.3) is allowed", () => {
    const e = check([policy("budget_usd", { max_usd: 0.3 })], act({ proposedUsd: 0.2 }), state(0.1))
    expect(e.reason).not.toBe("the run would spend $0.3, over its budget of $0.3")
    expect(e.verdict).toBe("allow")
  })
})

describe("token_budget", () => {
  const tokens = policy("token_budget", { max_tokens: 1000 })

  test("using exactly the max is allowed; one token past blocks", () => {
    const ok = check([tokens], act({ proposedTokens: 100 }), state(0, 900))
    expectAllow(ok)
    expect(ok.next!.tokens).toBe(1000)
    expectBlock(
      check([tokens], act({ proposedTokens: 101 }), state(0, 900)),
      tokens,
      "the run would use 1001 tokens, over its budget of 1000"
    )
  })

  test("an action without proposed_tokens counts as zero", () => {
    expectAllow(check([tokens], act({ model: "m" }), state(0, 1000)))
    expectBlock(check([tokens], act({ model: "m" }), state(0, 1001)), tokens)
  })

  test("max_tokens 0 allows only token-free actions", () => {
    const zero = policy("token_budget", { max_tokens: 0 })
    expectAllow(check([zero], act({ proposedTokens: 0 })))
    expectBlock(check([zero], act({ proposedTokens: 1 })), zero, "the run would use 1 tokens, over its budget of 0")
  })
})

describe("max_steps", () => {
  const steps = policy("max_steps", { max_steps: 5 })

  test("step max_steps - 1 is allowed; step max_steps and beyond block", () => {
    expectAllow(check([steps], act({ stepIndex: 4 })))
    expectBlock(check([steps], act({ stepIndex: 5 })), steps, "step 5 is past the run's limit of 5 steps")
    expectBlock(check([steps], act({ stepIndex: 6 })), steps, "step 6 is past the run's limit of 5 steps")
  })

  test("step 0 with max_steps 1 is allowed, step 1 blocks", () => {
    const one = policy("max_steps", { max_steps: 1 })
    expectAllow(check([one], act({ stepIndex: 0 })))
    expectBlock(check([one], act({ stepIndex: 1 })), one)
  })

  test("an action without step_index is not affected", () => {
    expectAllow(check([steps], act({ toolName: "x" })))
  })
})

describe("tool_denylist", () => {
  test("a matching tool blocks, naming the tool; others are allowed", () => {
    const deny = policy("tool_denylist", { patterns: ["shell.*", "rm"] })
    expectBlock(check([deny], act({ toolName: "shell.exec" })), deny, "tool 'shell.exec' is on the deny list")
    expectBlock(check([deny], act({ toolName: "shell." })), deny)
    expectBlock(check([deny], act({ toolName: "rm" })), deny, "tool 'rm' is on the deny list")
    expectAllow(check([deny], act({ toolName: "shellXexec" })))
    expectAllow(check([deny], act({ toolName: "shell" })))
    expectAllow(check([deny], act({ toolName: "rmdir" })))
    expectAllow(check([deny], act({ toolName: "xrm" })))
  })

  test("matching is case-sensitive and anchored", () => {
    const deny = policy("tool_denylist", { patterns: ["Shell"] })
    expectAllow(check([deny], act({ toolName: "shell" })))
    expectAllow(check([deny], act({ toolName: "MyShell" })))
    expectBlock(check([deny], act({ toolName: "Shell" })), deny)
  })

  test("`*` matches any run of characters, including none and newlines", () => {
    const deny = policy("tool_denylist", { patterns: ["*"] })
    for (const tool of ["", "x", "a.b", "line\nbreak", "(x)[y]"])
      expectBlock(check([deny], act({ toolName: tool })), deny)
    const mid = policy("tool_denylist", { patterns: ["a*z"] })
    expectBlock(check([mid], act({ toolName: "az" })), mid)
    expectBlock(check([mid], act({ toolName: "a-anything-z" })), mid)
    expectAllow(check([mid], act({ toolName: "a-anything-zz-" })))
  })

  test("`?` matches exactly one character", () => {
    const deny = policy("tool_denylist", { patterns: ["f?o"] })
    expectBlock(check([deny], act({ toolName: "foo" })), deny)
    expectBlock(check([deny], act({ toolName: "f.o" })), deny)
    expectAllow(check([deny], act({ toolName: "fo" })))
    expectAllow(check([deny], act({ toolName: "fooo" })))
  })

  test("regex metacharacters in patterns are literal", () => {
    const cases: ReadonlyArray<readonly [string, string, string]> = [
      ["a.b", "a.b", "axb"],
      ["(x)", "(x)", "x"],
      ["[y]", "[y]", "y"],
      ["a+b", "a+b", "aab"],
      ["^a$", "^a$", "a"],
      ["a|b", "a|b", "a"],
      ["\\d", "\\d", "5"],
      ["x{2}", "x{2}", "xx"],
      ["$HOME", "$HOME", "HOME"],
      ["a\\", "a\\", "a"],
      ["[a-z]*", "[a-z]tail", "q"]
    ]
    for (const [pattern, hit, miss] of cases) {
      const deny = policy("tool_denylist", { patterns: [pattern] })
      expectBlock(check([deny], act({ toolName: hit })), deny)
      expectAllow(check([deny], act({ toolName: miss })))
    }
  })

  test("an action without a tool is not affected, even by `*`", () => {
    const deny = policy("tool_denylist", { patterns: ["*"] })
    expectAllow(check([deny], act({ model: "gpt-4o", proposedTokens: 10 })))
    expectAllow(check([deny], act()))
  })
})

describe("tool_allowlist", () => {
  const allow = policy("tool_allowlist", { patterns: ["read_*", "search", "v?.api"] })

  test("a listed tool is allowed; an unlisted one blocks, naming the tool", () => {
    expectAllow(check([allow], act({ toolName: "read_file" })))
    expectAllow(check([allow], act({ toolName: "search" })))
    expectAllow(check([allow], act({ toolName: "v1.api" })))
    expectBlock(check([allow], act({ toolName: "write_file" })), allow, "tool 'write_file' is not on the allow list")
    expectBlock(check([allow], act({ toolName: "v1xapi" })), allow, "tool 'v1xapi' is not on the allow list")
    expectBlock(check([allow], act({ toolName: "searching" })), allow)
  })

  test("an action without a tool (a model call) is not affected", () => {
    expectAllow(check([allow], act({ model: "gpt-4o" })))
  })
})

describe("model_allowlist", () => {
  const models = policy("model_allowlist", { patterns: ["gpt-4o*", "claude-3.5-sonnet"] })

  test("a listed model is allowed; an unlisted one blocks, naming the model", () => {
    expectAllow(check([models], act({ model: "gpt-4o" })))
    expectAllow(check([models], act({ model: "gpt-4o-mini" })))
    expectAllow(check([models], act({ model: "claude-3.5-sonnet" })))
    expectBlock(
      check([models], act({ model: "claude-3x5-sonnet" })),
      models,
      "model 'claude-3x5-sonnet' is not on the allow list"
    )
    expectBlock(check([models], act({ model: "gpt-4" })), models, "model 'gpt-4' is not on the allow list")
  })

  test("an action without a model (a tool call) is not affected", () => {
    expectAllow(check([models], act({ toolName: "read_file" })))
  })
})

describe("loop_breaker", () => {
  test("without a window: max_repeats identical calls are allowed, the next one blocks", () => {
    const loop = policy("loop_breaker", { max_repeats: 3 })
    expectAllow(
      check(
        [loop],
        act({ toolName: "fetch", toolArgsHash: "h" }),
        state(0, 0, [rec("fetch", "h", 1), rec("fetch", "h", 2)])
      )
    )
    expectBlock(
      check(
        [loop],
        act({ toolName: "fetch", toolArgsHash: "h" }),
        state(0, 0, [rec("fetch", "h", 1), rec("fetch", "h", 2), rec("fetch", "h", 3)])
      ),
      loop,
      "tool 'fetch' was already called 3 times with the same arguments in this run (limit 3)"
    )
  })

  test("fed through evaluate, exactly max_repeats identical calls pass", () => {
    const loop = policy("loop_breaker", { max_repeats: 3 })
    let run = EMPTY_RUN
    const verdicts: Array<string> = []
    for (let i = 0; i < 5; i++) {
      const e = check([loop], act({ toolName: "fetch", toolArgsHash: "h", stepIndex: i }), run, NO_HOLDS, NOW + i)
      verdicts.push(e.verdict)
      if (e.next) run = e.next
    }
    expect(verdicts).toEqual(["allow", "allow", "allow", "block", "block"])
  })

  test("other arguments and other tools are not counted; a missing hash equals a null one", () => {
    const loop = policy("loop_breaker", { max_repeats: 1 })
    const run = state(0, 0, [rec("fetch", "h", 1), rec("fetch", null, 2), rec("other", "h2", 3)])
    expectAllow(check([loop], act({ toolName: "fetch", toolArgsHash: "h3" }), run))
    expectAllow(check([loop], act({ toolName: "other", toolArgsHash: "h" }), run))
    expectBlock(check([loop], act({ toolName: "fetch", toolArgsHash: "h" }), run), loop)
    expectBlock(
      check([loop], act({ toolName: "fetch" }), run),
      loop,
      "tool 'fetch' was already called 1 times with the same arguments in this run (limit 1)"
    )
  })

  test("an action without a tool is not affected", () => {
    const loop = policy("loop_breaker", { max_repeats: 1 })
    expectAllow(check([loop], act({ model: "m" }), state(0, 0, [rec(null, null, 1), rec(null, null, 2)])))
  })

  test("with window_steps: only calls within the last window_steps steps count", () => {
    const loop = policy("loop_breaker", { max_repeats: 2, window_steps: 3 })
    const run = state(0, 0, [rec("fetch", "h", 4), rec("fetch", "h", 5)])
    // step 7: step 4 is 3 steps back (outside the window), step 5 is inside -> 1 repeat, allowed
    expectAllow(check([loop], act({ toolName: "fetch", toolArgsHash: "h", stepIndex: 7 }), run))
    // step 6: both are inside -> 2 repeats, blocked
    expectBlock(check([loop], act({ toolName: "fetch", toolArgsHash: "h", stepIndex: 6 }), run), loop)
    // step 100: none inside
    expectAllow(check([loop], act({ toolName: "fetch", toolArgsHash: "h", stepIndex: 100 }), run))
  })

  test("with window_steps: an action without a step, or records without steps, fall back to counting the whole run", () => {
    const loop = policy("loop_breaker", { max_repeats: 2, window_steps: 3 })
    expectBlock(
      check(
        [loop],
        act({ toolName: "fetch", toolArgsHash: "h" }),
        state(0, 0, [rec("fetch", "h", 1), rec("fetch", "h", 2)])
      ),
      loop
    )
    expectBlock(
      check(
        [loop],
        act({ toolName: "fetch", toolArgsHash: "h", stepIndex: 100 }),
        state(0, 0, [rec("fetch", "h", null), rec("fetch", "h", null)])
      ),
      loop
    )
  })

  // The largest max_repeats the schema accepts still fires, even with other calls interleaved.
  test("a loop breaker at the schema's maximum (1000) fires, with three other calls between repeats", () => {
    const loop = policy("loop_breaker", { max_repeats: 1000 })
    let run = EMPTY_RUN
    let allowed = 0
    for (let i = 0; i < 1010; i++) {
      for (const other of ["a", "b", "c"]) {
        const o = check([loop], act({ toolName: other, toolArgsHash: String(i) }), run)
        if (o.next) run = o.next
      }
      const e = check([loop], act({ toolName: "fetch", toolArgsHash: "h" }), run)
      if (e.next) {
        run = e.next
        allowed++
      }
    }
    expect(allowed).toBe(1000)
  })
})

describe("rate", () => {
  const rate = policy("rate", { max_calls: 3, window_seconds: 60 })

  test("max_calls within the window block the next call; a call exactly window_seconds old no longer counts", () => {
    const full = state(0, 0, [
      rec("a", null, null, NOW - 59_999),
      rec(null, null, null, NOW - 30_000),
      rec("b", null, null, NOW - 1)
    ])
    expectBlock(check([rate], act({ toolName: "c" }), full), rate, "the run made 3 calls in the last 60 s (limit 3)")
    const oneOld = state(0, 0, [
      rec("a", null, null, NOW - 60_000),
      rec(null, null, null, NOW - 30_000),
      rec("b", null, null, NOW - 1)
    ])
    expectAllow(check([rate], act({ toolName: "c" }), oneOld))
  })

  test("fed through evaluate with nowMs: max_calls pass, then block until the window slides", () => {
    let run = EMPTY_RUN
    const verdicts: Array<string> = []
    for (const t of [0, 1_000, 2_000, 3_000, 59_999, 60_000, 60_500, 61_000]) {
      const e = check([rate], act({ model: "m" }), run, NO_HOLDS, NOW + t)
      verdicts.push(e.verdict)
      if (e.next) run = e.next
    }
    // 0,1s,2s allowed; 3s and 59.999s blocked (3 within 60 s); at 60 s the call at 0 slid out; at 60.5 s the window
    // holds 1s, 2s, 60s -> blocked; at 61 s the call at 1 s slid out.
    expect(verdicts).toEqual(["allow", "allow", "allow", "block", "block", "allow", "block", "allow"])
  })

  test("a rate policy at the schema's maximum (1000 calls) fires", () => {
    const big = policy("rate", { max_calls: 1000, window_seconds: 86_400 })
    let run = EMPTY_RUN
    let allowed = 0
    for (let i = 0; i < 1010; i++) {
      const e = check([big], act({ toolName: "t" }), run)
      if (e.next) {
        run = e.next
        allowed++
      }
    }
    expect(allowed).toBe(1000)
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Scope

describe("scope", () => {
  const denyAll = (over: Partial<Policy> = {}) => policy("tool_denylist", { patterns: ["*"] }, over)

  test("a disabled policy is skipped", () => {
    expectAllow(check([denyAll({ enabled: false })], act({ toolName: "x" })))
    expectAllow(check([policy("budget_usd", { max_usd: 0 }, { enabled: false })], act({ proposedUsd: 5 })))
  })

  test("a project-scoped policy applies to its project only", () => {
    const p = denyAll({ projectId: "proj-a" })
    expectBlock(check([p], act({ toolName: "x", projectId: "proj-a" })), p)
    expectAllow(check([p], act({ toolName: "x", projectId: "proj-b" })))
  })

  test("a project-less action is not subject to project-scoped policies", () => {
    expectAllow(check([denyAll({ projectId: "proj-a" })], act({ toolName: "x" })))
  })

  test("an account-wide policy applies to every project and to project-less actions", () => {
    const p = denyAll()
    expectBlock(check([p], act({ toolName: "x", projectId: "proj-a" })), p)
    expectBlock(check([p], act({ toolName: "x" })), p)
  })

  test("no policies: allow with a plain reason", () => {
    const e = check([], act({ toolName: "x" }))
    expectAllow(e)
    expect(e.reason).toBe("no policy blocks or holds this action")
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Precedence

describe("precedence", () => {
  const approval = () => policy("require_approval", { tool_patterns: ["deploy*"] })
  const deny = () => policy("tool_denylist", { patterns: ["deploy*"] })

  test("block beats hold regardless of order", () => {
    const h = approval()
    const b = deny()
    expectBlock(check([h, b], act({ toolName: "deploy" })), b)
    expectBlock(check([b, h], act({ toolName: "deploy" })), b)
  })

  test("hold beats allow regardless of order", () => {
    const h = approval()
    const fine = policy("budget_usd", { max_usd: 100 })
    for (const order of [
      [h, fine],
      [fine, h]
    ]) {
      const e = check(order, act({ toolName: "deploy", proposedUsd: 1 }))
      expect(e.verdict).toBe("hold")
      expect(e.policy).toEqual({ id: h.id, type: "require_approval" })
      expect(e.next).toBeUndefined()
    }
  })

  test("an approved hold does not override a hold from another policy", () => {
    const approved = policy("require_approval", { tool_patterns: ["deploy*"], approval_scope: "run" })
    const other = approval()
    const holds = new Map<string, HoldState>([
      [
        approved.id,
        { id: "h1", policyId: approved.id, status: "approved", reason: null, expiresAtMs: null, consumed: false }
      ]
    ])
    for (const order of [
      [approved, other],
      [other, approved]
    ]) {
      const e = check(order, act({ toolName: "deploy" }), EMPTY_RUN, holds)
      expect(e.verdict).toBe("hold")
      expect(e.policy!.id).toBe(other.id)
      expect(e.consumeHolds).toBeUndefined()
    }
  })

  test("among several blocks the first in creation (array) order is named", () => {
    const d = deny()
    const s = policy("max_steps", { max_steps: 1 })
    const b = policy("budget_usd", { max_usd: 0 })
    const a = act({ toolName: "deploy", stepIndex: 3, proposedUsd: 1 })
    expectBlock(check([d, s, b], a), d, "tool 'deploy' is on the deny list")
    expectBlock(check([s, d, b], a), s, "step 3 is past the run's limit of 1 steps")
    expectBlock(check([b, s, d], a), b)
  })

  test("among several holds the first in order is named and opened", () => {
    const h1 = approval()
    const h2 = approval()
    const e = check([h1, h2], act({ toolName: "deploy" }))
    expect(e.verdict).toBe("hold")
    expect(e.policy!.id).toBe(h1.id)
    expect(e.openHold).toEqual({ policyId: h1.id, expiresInSeconds: null })
    expect(check([h2, h1], act({ toolName: "deploy" })).policy!.id).toBe(h2.id)
  })

  test("skipped policies don't count for precedence", () => {
    const off = deny()
    const e = check([{ ...off, enabled: false }, approval()], act({ toolName: "deploy" }))
    expect(e.verdict).toBe("hold")
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Counters

describe("counters", () => {
  test("on allow, next advances spent and tokens and appends the action to recent; the input is untouched", () => {
    const before = state(1.5, 100, [rec("a", "x", 0, NOW - 10)])
    const e = check(
      [policy("budget_usd", { max_usd: 100 })],
      act({ toolName: "b", toolArgsHash: "y", stepIndex: 1, proposedUsd: 2.25, proposedTokens: 50 }),
      before
    )
    expectAllow(e)
    expect(e.next).toEqual({
      spentUsd: 3.75,
      tokens: 150,
      recent: [rec("a", "x", 0, NOW - 10), { tool: "b", args: "y", step: 1, atMs: NOW }]
    })
    expect(before).toEqual(state(1.5, 100, [rec("a", "x", 0, NOW - 10)]))
  })

  test("missing fields are recorded as null and count as zero", () => {
    const e = check([], act(), state(2, 3))
    expect(e.next).toEqual({ spentUsd: 2, tokens: 3, recent: [{ tool: null, args: null, step: null, atMs: NOW }] })
  })

  test("recent is capped at MAX_RECENT, dropping the oldest", () => {
    const full = state(
      0,
      0,
      Array.from({ length: MAX_RECENT }, (_, i) => rec("t", String(i), i, i))
    )
    const e = check([], act({ toolName: "new" }), full)
    expect(e.next!.recent.length).toBe(MAX_RECENT)
    expect(e.next!.recent[0]).toEqual(rec("t", "1", 1, 1))
    expect(e.next!.recent[MAX_RECENT - 1]).toEqual({ tool: "new", args: null, step: null, atMs: NOW })
  })

  test("on block or hold there is no next", () => {
    expect(check([policy("budget_usd", { max_usd: 0 })], act({ proposedUsd: 1 })).next).toBeUndefined()
    expect(check([policy("require_approval", { tool_patterns: ["*"] })], act({ toolName: "x" })).next).toBeUndefined()
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Holds

describe("require_approval holds", () => {
  const approval = (params: Record<string, unknown> = {}) =>
    policy("require_approval", { tool_patterns: ["deploy*"], expires_in_seconds: 3600, ...params })
  const hold = (
    p: Policy,
    status: HoldState["status"],
    over: Partial<HoldState> = {}
  ): ReadonlyMap<string, HoldState> =>
    new Map([
      [p.id, { id: "hold-1", policyId: p.id, status, reason: null, expiresAtMs: null, consumed: false, ...over }]
    ])
  const deploy = act({ toolName: "deploy_prod", toolArgsHash: "abc" })

  test("no hold: hold verdict with an openHold carrying expires_in_seconds", () => {
    const p = approval()
    const e = check([p], deploy)
    expect(e).toEqual({
      verdict: "hold",
      policy: { id: p.id, type: "require_approval" },
      reason: "tool 'deploy_prod' needs a human approval",
      openHold: { policyId: p.id, expiresInSeconds: 3600 }
    })
  })

  test("no expiry on the policy: openHold with expiresInSeconds null", () => {
    const p = policy("require_approval", { tool_patterns: ["deploy*"] })
    expect(check([p], deploy).openHold).toEqual({ policyId: p.id, expiresInSeconds: null })
  })

  test("pending: hold with the same holdId and no new openHold", () => {
    const p = approval()
    for (const expiresAtMs of [null, NOW + 1]) {
      const e = check([p], deploy, EMPTY_RUN, hold(p, "pending", { expiresAtMs }))
      expect(e.verdict).toBe("hold")
      expect(e.holdId).toBe("hold-1")
      expect(e.openHold).toBeUndefined()
      expect(e.policy).toEqual({ id: p.id, type: "require_approval" })
      expect(e.reason).toBe("tool 'deploy_prod' is waiting for a human approval")
    }
  })

  test("pending but expired (expiry at or before now): block saying it expired", () => {
    const p = approval()
    for (const expiresAtMs of [NOW, NOW - 1]) {
      const e = check([p], deploy, EMPTY_RUN, hold(p, "pending", { expiresAtMs }))
      expectBlock(e, p, "the approval request for tool 'deploy_prod' expired")
      expect(e.reason).toContain("expired")
      expect(e.holdId).toBe("hold-1")
    }
  })

  test("denied: block with the approver's reason", () => {
    const p = approval()
    const e = check([p], deploy, EMPTY_RUN, hold(p, "denied", { reason: "too risky on a Friday" }))
    expectBlock(e, p, "tool 'deploy_prod' was denied: too risky on a Friday")
    expect(e.holdId).toBe("hold-1")
    expectBlock(check([p], deploy, EMPTY_RUN, hold(p, "denied")), p, "tool 'deploy_prod' was denied")
  })

  test("approved with scope once: allow and consume the hold", () => {
    const p = approval()
    const e = check([p], deploy, EMPTY_RUN, hold(p, "approved"))
    expectAllow(e)
    expect(e.consumeHolds).toEqual(["hold-1"])
  })

  test("approved and already consumed: a new hold is opened", () => {
    const p = approval()
    const e = check([p], deploy, EMPTY_RUN, hold(p, "approved", { consumed: true }))
    expect(e.verdict).toBe("hold")
    expect(e.holdId).toBeUndefined()
    expect(e.openHold).toEqual({ policyId: p.id, expiresInSeconds: 3600 })
    expect(e.reason).toBe("tool 'deploy_prod' needs a human approval")
  })

  test("approved with scope run: allow without consuming, again and again", () => {
    const p = approval({ approval_scope: "run" })
    for (let i = 0; i < 3; i++) {
      const e = check([p], deploy, EMPTY_RUN, hold(p, "approved"))
      expectAllow(e)
      expect(e.consumeHolds).toBeUndefined()
    }
  })

  test("an approved hold is not consumed when another policy blocks the action", () => {
    const p = approval()
    const b = policy("budget_usd", { max_usd: 0 })
    const e = check([p, b], act({ toolName: "deploy_prod", proposedUsd: 1 }), EMPTY_RUN, hold(p, "approved"))
    expectBlock(e, b)
  })

  test("a hold of another policy does not count for this one", () => {
    const p = approval()
    const other = approval()
    const e = check([p], deploy, EMPTY_RUN, hold(other, "approved"))
    expect(e.verdict).toBe("hold")
    expect(e.openHold).toEqual({ policyId: p.id, expiresInSeconds: 3600 })
  })

  test("model_patterns: a matching model call is held; the reason names the model", () => {
    const p = policy("require_approval", { model_patterns: ["gpt-4*", "o1-?"] })
    const e = check([p], act({ model: "gpt-4o" }))
    expect(e.verdict).toBe("hold")
    expect(e.reason).toBe("model 'gpt-4o' needs a human approval")
    expect(check([p], act({ model: "o1-x" })).verdict).toBe("hold")
    expectAllow(check([p], act({ model: "o1-xx" })))
    expectAllow(check([p], act({ model: "gpt-3.5" })))
    expectAllow(check([p], act({ toolName: "gpt-4o" })))
  })

  test("tool_patterns only: a model call without a tool is not held, nor is an unmatched tool", () => {
    const p = approval()
    expectAllow(check([p], act({ model: "deploy-model" })))
    expectAllow(check([p], act({ toolName: "read_file" })))
  })

  test("a full hold lifecycle (open, pending, approve once, consume, reopen) through a simulated store", () => {
    const p = approval()
    const holds = new Map<string, HoldState>()
    let n = 0
    const step = (nowMs: number) => {
      const e = check([p], deploy, EMPTY_RUN, holds, nowMs)
      if (e.openHold) {
        holds.set(e.openHold.policyId, {
          id: `h${++n}`,
          policyId: e.openHold.policyId,
          status: "pending",
          reason: null,
          expiresAtMs: e.openHold.expiresInSeconds === null ? null : nowMs + e.openHold.expiresInSeconds * 1000,
          consumed: false
        })
      }
      for (const [k, h] of holds) if (e.consumeHolds?.includes(h.id)) holds.set(k, { ...h, consumed: true })
      return e
    }
    const first = step(NOW)
    expect(first.verdict).toBe("hold")
    const again = step(NOW + 1000)
    expect(again.verdict).toBe("hold")
    expect(again.holdId).toBe("h1")
    holds.set(p.id, { ...holds.get(p.id)!, status: "approved" })
    const ok = step(NOW + 2000)
    expect(ok.verdict).toBe("allow")
    expect(ok.consumeHolds).toEqual(["h1"])
    const next = step(NOW + 3000)
    expect(next.verdict).toBe("hold")
    expect(next.openHold).toBeDefined()
    expect(holds.get(p.id)!.id).toBe("h2")
    // never approved: it expires after an hour
    expect(step(NOW + 3000 + 3_600_000).verdict).toBe("block")
  })

  test("a hold triggered by model_patterns names the model even when the action also has a tool", () => {
    const p = policy("require_approval", { model_patterns: ["gpt-4*"] })
    const e = check([p], act({ toolName: "search", model: "gpt-4o" }))
    expect(e.verdict).toBe("hold")
    expect(e.reason).toBe("model 'gpt-4o' needs a human approval")
  })

  test("two once-approvals that allow one action are both used up", () => {
    const a = policy("require_approval", { tool_patterns: ["deploy*"] })
    const b = policy("require_approval", { tool_patterns: ["deploy*"] })
    const holds = new Map<string, HoldState>([
      [a.id, { id: "ha", policyId: a.id, status: "approved", reason: null, expiresAtMs: null, consumed: false }],
      [b.id, { id: "hb", policyId: b.id, status: "approved", reason: null, expiresAtMs: null, consumed: false }]
    ])
    const e = check([a, b], deploy, EMPTY_RUN, holds)
    expect(e.verdict).toBe("allow")
    for (const [k, h] of holds) if (e.consumeHolds?.includes(h.id)) holds.set(k, { ...h, consumed: true })
    // a's approver approves a second identical action; b's approver has approved only once
    holds.set(a.id, { id: "ha2", policyId: a.id, status: "approved", reason: null, expiresAtMs: null, consumed: false })
    const second = check([a, b], deploy, EMPTY_RUN, holds)
    expect(second.verdict).toBe("hold")
    expect(second.policy!.id).toBe(b.id)
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Glob

describe("globMatch", () => {
  const alphabet = fc.constantFrom(
    "a",
    "b",
    ".",
    "(",
    ")",
    "[",
    "]",
    "\\",
    "^",
    "$",
    "+",
    "|",
    "{",
    "}",
    "\n",
    "-",
    "/"
  )
  const patternChar = fc.oneof(alphabet, fc.constant("*"), fc.constant("?"))

  test("agrees with a reference matcher on patterns full of regex metacharacters", () => {
    fc.assert(
      fc.property(
        fc.array(patternChar, { maxLength: 8 }).map((cs) => cs.join("")),
        fc.array(alphabet, { maxLength: 8 }).map((cs) => cs.join("")),
        (pattern, value) => {
          expect(globMatch(pattern, value)).toBe(refGlob(pattern, value))
        }
      ),
      { numRuns: 2000 }
    )
  })

  test("a pattern without wildcards matches only itself", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 20 }).filter((s) => !s.includes("*") && !s.includes("?")),
        fc.string({ maxLength: 20 }),
        (s, other) => {
          expect(globMatch(s, s)).toBe(true)
          expect(globMatch(s, other)).toBe(s === other)
        }
      )
    )
  })

  test("`?` matches one astral character (emoji)", () => {
    expect(globMatch("tool-?", "tool-🔧")).toBe(true)
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Properties

const PROJECTS = ["proj-a", "proj-b"] as const
const TOOLS = ["read", "write", "shell.exec", "deploy", "a.b", "(x)"] as const
const MODELS = ["gpt-4o", "claude-3.5", "o1"] as const

const smallPatterns = fc.array(
  fc.oneof(fc.constantFrom(...TOOLS, ...MODELS, "*", "?", "shell.*", "de*", "(x)", "a?b"), fc.string({ maxLength: 6 })),
  { minLength: 1, maxLength: 4 }
)
const bigInt = (max: number) =>
  fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.double({ min: 0, max, noNaN: true }).map(Math.floor))
const positiveInt = (max: number) =>
  fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.double({ min: 1, max, noNaN: true }).map(Math.floor))

/** Any policy type with parameters inside the schema's ranges. */
const anyTypedParams: fc.Arbitrary<{ type: PolicyType; params: Record<string, unknown> }> = fc.oneof(
  fc.record({
    type: fc.constant("budget_usd" as const),
    params: fc.record({
      max_usd: fc.oneof(fc.double({ min: 0, max: 100, noNaN: true }), fc.double({ min: 0, max: 1e12, noNaN: true }))
    })
  }),
  fc.record({ type: fc.constant("token_budget" as const), params: fc.record({ max_tokens: bigInt(1e15) }) }),
  fc.record({ type: fc.constant("max_steps" as const), params: fc.record({ max_steps: positiveInt(1e12) }) }),
  fc.record({ type: fc.constant("tool_denylist" as const), params: fc.record({ patterns: smallPatterns }) }),
  fc.record({ type: fc.constant("tool_allowlist" as const), params: fc.record({ patterns: smallPatterns }) }),
  fc.record({ type: fc.constant("model_allowlist" as const), params: fc.record({ patterns: smallPatterns }) }),
  fc.record({
    type: fc.constant("loop_breaker" as const),
    params: fc.record(
      { max_repeats: fc.integer({ min: 1, max: 10_000 }), window_steps: fc.integer({ min: 1, max: 1_000_000 }) },
      { requiredKeys: ["max_repeats"] }
    )
  }),
  fc.record({
    type: fc.constant("rate" as const),
    params: fc.record({
      max_calls: fc.integer({ min: 1, max: 1_000_000 }),
      window_seconds: fc.integer({ min: 1, max: 86_400 })
    })
  }),
  fc.record({
    type: fc.constant("require_approval" as const),
    params: fc.record(
      {
        tool_patterns: smallPatterns,
        model_patterns: smallPatterns,
        expires_in_seconds: fc.integer({ min: 1, max: 30 * 86_400 }),
        approval_scope: fc.constantFrom("once", "run")
      },
      { requiredKeys: [] }
    )
  })
)

const anyPolicies = fc
  .array(
    fc.record({ tp: anyTypedParams, projectId: fc.constantFrom(null, null, ...PROJECTS), enabled: fc.boolean() }),
    { maxLength: 8 }
  )
  .map((rows) =>
    rows.map(
      (r, i): Policy => ({
        id: `policy-${i}`,
        type: r.tp.type,
        projectId: r.projectId,
        enabled: r.enabled,
        params: r.tp.params,
        createdAt: `2025-01-01T00:00:${String(i).padStart(2, "0")}.000Z`
      })
    )
  )

const anyAction: fc.Arbitrary<ProposedAction> = fc.record(
  {
    runId: fc.constant("run-1"),
    projectId: fc.constantFrom(...PROJECTS),
    toolName: fc.oneof(fc.constantFrom(...TOOLS), fc.string({ maxLength: 6 })),
    toolArgsHash: fc.constantFrom("h1", "h2"),
    model: fc.constantFrom(...MODELS),
    proposedTokens: fc.integer({ min: 0, max: 5000 }),
    proposedUsd: fc.oneof(fc.double({ min: 0, max: 50, noNaN: true }), fc.integer({ min: 0, max: 50 })),
    stepIndex: fc.integer({ min: 0, max: 50 })
  },
  { requiredKeys: ["runId"] }
)

const applies = (p: Policy, a: ProposedAction) => p.enabled && (p.projectId === null || p.projectId === a.projectId)

describe("properties", () => {
  test("(1) allowed spend and tokens never exceed any enabled account-wide budget", () => {
    const withBudgets = fc
      .tuple(
        anyPolicies,
        fc.array(
          fc.record({
            usd: fc.double({ min: 0, max: 200, noNaN: true }),
            tokens: fc.integer({ min: 0, max: 20_000 }),
            kind: fc.boolean()
          }),
          { minLength: 1, maxLength: 3 }
        )
      )
      .map(([ps, budgets]) => [
        ...ps,
        ...budgets.map(
          (b, i): Policy =>
            b.kind
              ? {
                  id: `budget-${i}`,
                  type: "budget_usd",
                  projectId: null,
                  enabled: true,
                  params: { max_usd: b.usd },
                  createdAt: "2025-01-02T00:00:00.000Z"
                }
              : {
                  id: `tokens-${i}`,
                  type: "token_budget",
                  projectId: null,
                  enabled: true,
                  params: { max_tokens: b.tokens },
                  createdAt: "2025-01-02T00:00:00.000Z"
                }
        )
      ])
    fc.assert(
      fc.property(
        withBudgets.chain((ps) =>
          fc.tuple(fc.shuffledSubarray(ps, { minLength: ps.length }), fc.array(anyAction, { maxLength: 40 }))
        ),
        ([policies, actions]) => {
          let run = EMPTY_RUN
          let usd = 0
          let tokens = 0
          let now = NOW
          for (const a of actions) {
            now += 500
            const e = evaluate(policies, a, run, NO_HOLDS, now)
            if (e.verdict === "allow") {
              usd += a.proposedUsd ?? 0
              tokens += a.proposedTokens ?? 0
              run = e.next!
            } else {
              expect(e.next).toBeUndefined()
            }
            expect(run.spentUsd).toBe(usd)
            expect(run.tokens).toBe(tokens)
          }
          for (const p of policies) {
            if (!p.enabled || p.projectId !== null) continue
            // Budgets are kept to the micro-dollar: anything below half a micro-dollar is not money.
            if (p.type === "budget_usd") expect(usd).toBeLessThanOrEqual((p.params.max_usd as number) + 5e-7)
            if (p.type === "token_budget") expect(tokens).toBeLessThanOrEqual(p.params.max_tokens as number)
          }
        }
      ),
      { numRuns: 300 }
    )
  })

  test("(2) never allow (always block) when an applicable enabled deny-list pattern matches the tool", () => {
    const chars = fc.constantFrom("a", "b", ".", "(", ")", "[", "]", "\\", "$", "+", "|", "*", "?")
    const pattern = fc.array(chars, { minLength: 1, maxLength: 6 }).map((cs) => cs.join(""))
    const instantiate = (p: string) =>
      fc
        .array(fc.constantFrom("a", "b", ".", "(", "]", "x"), { minLength: p.length * 2, maxLength: p.length * 2 })
        .map((fill) =>
          [...p].map((c, i) => (c === "*" ? fill.slice(i, i + (i % 3)).join("") : c === "?" ? fill[i]! : c)).join("")
        )
    const scenario = fc
      .record({
        others: anyPolicies,
        deny: fc.array(pattern, { minLength: 1, maxLength: 3 }),
        projectId: fc.constantFrom(null, null, ...PROJECTS),
        enabled: fc.boolean(),
        at: fc.nat(10)
      })
      .chain((s) =>
        fc.record({
          s: fc.constant(s),
          action: anyAction,
          tool: fc.oneof(
            instantiate(s.deny[0]!),
            fc.array(chars, { maxLength: 6 }).map((cs) => cs.join(""))
          ),
          hasTool: fc.boolean()
        })
      )
    fc.assert(
      fc.property(scenario, ({ s, action, tool, hasTool }) => {
        const deny: Policy = {
          id: "deny",
          type: "tool_denylist",
          projectId: s.projectId,
          enabled: s.enabled,
          params: { patterns: s.deny },
          createdAt: "2025-01-01T00:00:00.000Z"
        }
        const policies = [...s.others.slice(0, s.at), deny, ...s.others.slice(s.at)]
        const a: ProposedAction = hasTool
          ? { ...action, toolName: tool }
          : { runId: "run-1", projectId: action.projectId ?? "proj-a", model: "gpt-4o" }
        const e = evaluate(policies, a, EMPTY_RUN, NO_HOLDS, NOW)
        const mustBlock = policies.some(
          (p) =>
            p.type === "tool_denylist" &&
            applies(p, a) &&
            a.toolName !== undefined &&
            (p.params.patterns as Array<string>).some((pat) => refGlob(pat, a.toolName!))
        )
        if (mustBlock) {
          expect(e.verdict).toBe("block")
          expect(e.next).toBeUndefined()
        }
      }),
      { numRuns: 1000 }
    )
  })

  test("(3) evaluate never throws and always returns a well-formed evaluation", () => {
    const record: fc.Arbitrary<ActionRecord> = fc.record({
      tool: fc.option(fc.constantFrom(...TOOLS), { nil: null }),
      args: fc.option(fc.constantFrom("h1", "h2"), { nil: null }),
      step: fc.option(fc.integer({ min: 0, max: 60 }), { nil: null }),
      atMs: fc.integer({ min: NOW - 100_000_000, max: NOW + 1000 })
    })
    const holdsFor = (policies: ReadonlyArray<Policy>) =>
      fc
        .array(
          fc.record({
            i: fc.nat(),
            status: fc.constantFrom("pending" as const, "approved" as const, "denied" as const),
            reason: fc.option(fc.string({ maxLength: 10 }), { nil: null }),
            expiresAtMs: fc.option(fc.integer({ min: NOW - 10_000, max: NOW + 10_000 }), { nil: null }),
            consumed: fc.boolean()
          }),
          { maxLength: 4 }
        )
        .map((hs) => {
          const m = new Map<string, HoldState>()
          if (policies.length === 0) return m
          hs.forEach((h, k) => {
            const p = policies[h.i % policies.length]!
            m.set(p.id, {
              id: `hold-${k}`,
              policyId: p.id,
              status: h.status,
              reason: h.reason,
              expiresAtMs: h.expiresAtMs,
              consumed: h.consumed
            })
          })
          return m
        })
    const anyRun: fc.Arbitrary<RunState> = fc.record({
      spentUsd: fc.double({ min: 0, max: 1e13, noNaN: true }),
      tokens: bigInt(1e16),
      recent: fc.array(record, { maxLength: 30 })
    })
    const anyFreeAction: fc.Arbitrary<ProposedAction> = fc.record(
      {
        runId: fc.string({ minLength: 1, maxLength: 200 }),
        projectId: fc.oneof(fc.constantFrom(...PROJECTS), fc.string({ maxLength: 10 })),
        toolName: fc.string({ maxLength: 200 }),
        toolArgsHash: fc.string({ maxLength: 20 }),
        model: fc.string({ maxLength: 20 }),
        proposedTokens: bigInt(1e15),
        proposedUsd: fc.double({ min: 0, max: 1e12, noNaN: true }),
        stepIndex: bigInt(1e12)
      },
      { requiredKeys: ["runId"] }
    )
    fc.assert(
      fc.property(
        anyPolicies.chain((ps) =>
          fc.tuple(
            fc.constant(ps),
            fc.oneof(anyAction, anyFreeAction),
            anyRun,
            holdsFor(ps),
            fc.integer({ min: 0, max: 2 * NOW })
          )
        ),
        ([policies, action, run, holds, now]) => {
          const e = evaluate(policies, action, run, holds, now)
          expect(["allow", "block", "hold"]).toContain(e.verdict)
          expect(typeof e.reason).toBe("string")
          expect(e.reason.length).toBeGreaterThan(0)
          expect(e.reason).not.toMatch(/undefined|NaN|\[object/)
          if (e.verdict === "allow") {
            expect(e.policy).toBeNull()
            expect(e.next).toBeDefined()
            expect(e.openHold).toBeUndefined()
            expect(e.next!.recent.length).toBeLessThanOrEqual(MAX_RECENT)
          } else {
            expect(e.policy).not.toBeNull()
            expect(policies.some((p) => p.id === e.policy!.id && p.type === e.policy!.type && applies(p, action))).toBe(
              true
            )
            expect(e.next).toBeUndefined()
            expect(e.consumeHolds).toBeUndefined()
          }
          if (e.openHold) {
            expect(e.verdict).toBe("hold")
            expect(e.openHold.policyId).toBe(e.policy!.id)
            expect(e.holdId).toBeUndefined()
          }
        }
      ),
      { numRuns: 1000 }
    )
  })
})
