/** The load of the enforcement benchmarks: the guardrail policies they create and the checks they send. */
import { KEY, sleep } from "./Harness.ts"

// ---------------------------------------------------------------------------------------------- policies

/** The tools checks use (all on the allow list), the one denied tool, and the models (all allowed). */
export const TOOLS = [
  "web_search",
  "read_file",
  "write_file",
  "calculator",
  "fetch_url",
  "sql_query",
  "summarize",
  "send_email"
]
export const DENIED_TOOL = "shell.exec"
export const MODELS = ["gpt-4o-mini-2024-07-18", "claude-3-5-sonnet-20241022", "gemini-1.5-pro"]

/** 20 account-wide policies, all nine types; the first tool_denylist is the only one that ever answers (DENIED_TOOL). */
export const POLICIES: ReadonlyArray<Record<string, unknown>> = [
  { type: "budget_usd", name: "run budget", params: { max_usd: 1_000_000 } },
  { type: "token_budget", name: "run tokens", params: { max_tokens: 1e13 } },
  { type: "max_steps", name: "run steps", params: { max_steps: 1e12 } },
  { type: "tool_denylist", name: "no shell", params: { patterns: ["shell.*", "rm", "sudo*", "exec_*"] } },
  { type: "tool_allowlist", name: "known tools", params: { patterns: [...TOOLS, "search_*", "*_file"] } },
  {
    type: "model_allowlist",
    name: "approved models",
    params: { patterns: ["gpt-4o*", "claude-3-5-*", "gemini-1.5-*"] }
  },
  { type: "loop_breaker", name: "no loops", params: { max_repeats: 1000 } },
  { type: "rate", name: "per-second rate", params: { max_calls: 1000, window_seconds: 1 } },
  { type: "require_approval", name: "money moves", params: { tool_patterns: ["wire_*", "payments.transfer"] } },
  { type: "tool_denylist", name: "no destructive tools", params: { patterns: ["*delete*", "drop_*", "truncate_*"] } },
  { type: "budget_usd", name: "hard ceiling", params: { max_usd: 1e12 } },
  { type: "token_budget", name: "token ceiling", params: { max_tokens: 1e15 } },
  { type: "max_steps", name: "step ceiling", params: { max_steps: 999_999_999_999 } },
  { type: "model_allowlist", name: "any model", params: { patterns: ["*"] } },
  { type: "loop_breaker", name: "windowed loops", params: { max_repeats: 500, window_steps: 10_000 } },
  { type: "rate", name: "per-minute rate", params: { max_calls: 1000, window_seconds: 60 } },
  {
    type: "require_approval",
    name: "premium models",
    params: { model_patterns: ["o1-pro*"], expires_in_seconds: 3600 }
  },
  { type: "tool_denylist", name: "no payments", params: { patterns: ["payments.*", "refund_?"] } },
  { type: "tool_allowlist", name: "broad tools", params: { patterns: ["*"] } },
  { type: "require_approval", name: "emails to all", params: { tool_patterns: ["broadcast_*"], approval_scope: "run" } }
]

// ---------------------------------------------------------------------------------------------- checks

/**
 * Creates POLICIES on the service at `url`, one after another (creation order is evaluation order), and answers the
 * id of the first tool_denylist: the policy a denied check must name.
 */
export const createPolicies = async (url: string): Promise<string> => {
  let denyPolicyId: string | undefined
  for (const policy of POLICIES) {
    const res = await fetch(`${url}/api/v1/guardrails`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-service-key": KEY },
      body: JSON.stringify(policy)
    })
    const text = await res.text()
    if (res.status !== 200) throw new Error(`creating ${JSON.stringify(policy)}: HTTP ${res.status} ${text}`)
    const created = JSON.parse(text) as { id: string; type: string }
    if (created.type === "tool_denylist") denyPolicyId ??= created.id
    await sleep(2) // distinct created_at: creation order is evaluation order
  }
  if (denyPolicyId === undefined) throw new Error("no tool_denylist policy created")
  return denyPolicyId
}

/** The check every N-th request makes with DENIED_TOOL (blocked by the first tool_denylist). */
export const DENIED_EVERY = 50

/**
 * The checks of one phase: round-robin over `runs` runs (named after `prefix`, so each scenario's runs start empty),
 * each run's steps counting up. `step_index` carries the phase (phase × 10^6 + step), so the decisions the server
 * records can be told apart by phase.
 */
export class CheckSource {
  private k = 0
  private readonly steps: Uint32Array
  constructor(
    private readonly runs: number,
    private readonly prefix: string
  ) {
    this.steps = new Uint32Array(runs)
  }
  next(phase: number) {
    const k = this.k++
    const run = k % this.runs
    const step = this.steps[run]!++
    const denied = k % DENIED_EVERY === DENIED_EVERY - 1
    const body = JSON.stringify({
      run_id: `${this.prefix}-${String(run).padStart(5, "0")}`,
      tool_name: denied ? DENIED_TOOL : TOOLS[k % TOOLS.length],
      tool_args_hash: `args-${step}-${k % 9973}`,
      model: MODELS[k % MODELS.length],
      proposed_usd: 0.0001 * (1 + (k % 7)),
      proposed_tokens: 100 + (k % 400),
      step_index: phase * 1_000_000 + step
    })
    return { body, expected: denied ? ("block" as const) : ("allow" as const) }
  }
}

export interface Tally {
  allow: number
  block: number
  hold: number
  /** Blocks with policy_id null: "policy state unavailable" (fail-closed, e.g. a timeout). */
  failClosed: number
  /** Verdicts other than the one expected (allow, or a block by the first tool_denylist). */
  unexpected: number
  firstUnexpected?: string | undefined
}
export const newTally = (): Tally => ({ allow: 0, block: 0, hold: 0, failClosed: 0, unexpected: 0 })
export const addTally = (a: Tally, b: Tally) => {
  a.allow += b.allow
  a.block += b.block
  a.hold += b.hold
  a.failClosed += b.failClosed
  a.unexpected += b.unexpected
  a.firstUnexpected ??= b.firstUnexpected
}

export interface Target {
  readonly url: string
  /** The denylist policy expected to block DENIED_TOOL; undefined for the bare server (answers allow to all). */
  readonly denyPolicyId: string | undefined
}

/** POSTs one check; throws unless 200 with a verdict; tallies it. */
export const sendCheck = async (target: Target, check: { body: string; expected: "allow" | "block" }, tally: Tally) => {
  const res = await fetch(`${target.url}/api/v1/enforcement/check`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-key": KEY },
    body: check.body
  })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`check answered HTTP ${res.status}: ${text.slice(0, 500)}`)
  let decision: { verdict?: unknown; policy_id?: unknown; reason?: unknown }
  try {
    decision = JSON.parse(text)
  } catch {
    throw new Error(`check answered 200 without JSON: ${text.slice(0, 500)}`)
  }
  const verdict = decision.verdict
  if (verdict !== "allow" && verdict !== "block" && verdict !== "hold")
    throw new Error(`check answered no verdict: ${text.slice(0, 500)}`)
  tally[verdict]++
  if (verdict === "block" && decision.policy_id === null) tally.failClosed++
  const expected = target.denyPolicyId === undefined ? "allow" : check.expected
  const ok = verdict === expected && (verdict !== "block" || decision.policy_id === target.denyPolicyId)
  if (!ok) {
    tally.unexpected++
    tally.firstUnexpected ??= `${check.body} → ${text.slice(0, 300)}`
  }
}

// ---------------------------------------------------------------------------------------------- exports

/** The OTLP exports sent beside the checks (test/bench/enforcement.ts) and measured alone (otlp-export-cpu.ts). */
export const TRACES_PER_EXPORT = 5
export const SPANS_PER_TRACE = 10

const hex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex")
const str = (key: string, value: string) => ({ key, value: { stringValue: value } })
const int = (key: string, value: number) => ({ key, value: { intValue: String(value) } })

/** One OTLP/JSON export: TRACES_PER_EXPORT agent runs of SPANS_PER_TRACE spans (a root, model calls and tool calls). */
export const exportBody = () => {
  const spans: Array<unknown> = []
  const now = BigInt(Date.now()) * 1_000_000n
  for (let t = 0; t < TRACES_PER_EXPORT; t++) {
    const traceId = hex(16)
    const rootId = hex(8)
    spans.push({
      traceId,
      spanId: rootId,
      name: "invoke_agent research",
      kind: 1,
      startTimeUnixNano: String(now),
      endTimeUnixNano: String(now + 9_000_000_000n),
      attributes: [str("gen_ai.operation.name", "invoke_agent"), str("gen_ai.agent.name", "research")]
    })
    for (let s = 1; s < SPANS_PER_TRACE; s++) {
      const start = now + BigInt(s) * 1_000_000_000n
      const chat = s % 2 === 1
      spans.push({
        traceId,
        spanId: hex(8),
        parentSpanId: rootId,
        name: chat ? "chat gpt-4o-mini" : "execute_tool web_search",
        kind: 3,
        startTimeUnixNano: String(start),
        endTimeUnixNano: String(start + 800_000_000n),
        attributes: chat
          ? [
              str("gen_ai.operation.name", "chat"),
              str("gen_ai.request.model", "gpt-4o-mini"),
              int("gen_ai.usage.input_tokens", 900 + s),
              int("gen_ai.usage.output_tokens", 120),
              str("gen_ai.prompt", `step ${s}: what do the sources say about the question?`)
            ]
          : [
              str("gen_ai.operation.name", "execute_tool"),
              str("gen_ai.tool.name", "web_search"),
              str("gen_ai.tool.call.arguments", `{"q":"topic ${s}"}`)
            ]
      })
    }
  }
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: [str("service.name", "bench-agents")] },
        scopeSpans: [{ scope: { name: "bench" }, spans }]
      }
    ]
  })
}

export interface ExportTally {
  accepted: number
  shed: number
}

/** POSTs one export; 200 and 503 (shed, Retry-After) are counted, anything else throws. */
export const sendExport = async (url: string, tally: ExportTally) => {
  const res = await fetch(`${url}/v1/traces`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-key": KEY },
    body: exportBody()
  })
  const text = await res.text()
  if (res.status === 200) tally.accepted++
  else if (res.status === 503 && res.headers.get("retry-after") !== null) tally.shed++
  else throw new Error(`export answered HTTP ${res.status}: ${text.slice(0, 300)}`)
}

/**
 * `rate` requests/s on a fixed schedule for `seconds`: latencies from each one's scheduled time to its answer, and how
 * late this client sent each one. A request due while `maxInflight` are unanswered is not sent (dropped). The first
 * request's failure is thrown once all sent are answered.
 */
export const openLoop = async (rate: number, seconds: number, maxInflight: number, request: () => Promise<void>) => {
  const total = Math.max(1, Math.round(rate * seconds))
  const interval = 1000 / rate
  const latencies: Array<number> = []
  const lags: Array<number> = []
  const inflight: Array<Promise<void>> = []
  let pending = 0
  let dropped = 0
  let failure: unknown
  const start = performance.now() + 2
  let i = 0
  while (i < total && failure === undefined) {
    const now = performance.now()
    while (i < total && start + i * interval <= now) {
      const scheduled = start + i * interval
      i++
      if (pending >= maxInflight) {
        dropped++
        continue
      }
      lags.push(now - scheduled)
      pending++
      inflight.push(
        request()
          .then(
            () => void latencies.push(performance.now() - scheduled),
            (e) => void (failure ??= e)
          )
          .finally(() => void pending--)
      )
    }
    if (i < total) await sleep(Math.max(0, start + i * interval - performance.now()))
  }
  await Promise.all(inflight)
  if (failure !== undefined) throw failure
  return { sent: total - dropped, dropped, seconds: (performance.now() - start) / 1000, latencies, lags }
}
