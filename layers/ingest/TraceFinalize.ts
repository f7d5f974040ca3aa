import { createHash } from "node:crypto"
import { SPAN_TEXT_LIMITS } from "#src/domain/Span"
import { estimatedCost, type PriceTable } from "../llm/Prices.ts"
import type { MappedSpan } from "#src/domain/genai/MapSpan"

/** A span of an OTLP trace as reloaded from storage: the mapped shape, absent optionals absent. */
export type StoredSpan = MappedSpan["span"]

/** What finalizing one trace changes. */
export interface TraceFinalization {
  /**
   * Only spans whose agent fields or promoted usage changed. Each update carries the span's resolved agent
   * fields and, when they changed, its usage fields; a field absent here is left as stored.
   */
  readonly spanUpdates: ReadonlyArray<{
    id: string
    agent_id?: string
    agent_role?: string
    parent_agent_id?: string
    input_tokens?: number
    output_tokens?: number
    cost?: number
    /** Set with `cost` when that cost is the price table's estimate (stored as the span's `cost_estimated`). */
    cost_estimated?: true
    /** A model call's request and answer taken from the step span that wraps it (see `stepPayloads`). */
    input?: unknown
    output?: unknown
  }>
  readonly trace: {
    name: string | null
    status: "running" | "completed" | "failed"
    input?: unknown
    output?: unknown
    sessionId: string | null
    startedAt: string
    endedAt: string | null
    metadata: Record<string, unknown>
    environment: "production" | "sandbox"
    /** The project a sender named (openinference.project.name); absent leaves the trace's project as it is. */
    projectId?: string
  }
}

type Json = Record<string, unknown>
type SpanUpdate = TraceFinalization["spanUpdates"][number]

/** Longest session id a trace takes; longer ones are hashed (docs/otel-mapping.md, "Traces"). */
const MAX_SESSION_ID = 100
const MAX_TAGS = 50

interface Usage {
  readonly input_tokens?: number
  readonly output_tokens?: number
  readonly cost?: number
}

interface Node {
  readonly span: StoredSpan
  readonly meta: Json
  readonly otel: Json
  readonly hints: Json
  readonly startMs: number
  readonly endMs: number
  readonly isAgent: boolean
  readonly ownId: string | undefined
  readonly ownRole: string | undefined
  readonly aggregate: Usage | undefined
  parent: Node | undefined
  readonly children: Array<Node>
}

const isRecord = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)
const record = (v: unknown): Json => (isRecord(v) ? v : {})
const text = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined)
const count = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined)
const cap = (s: string, max: number) => {
  if (s.length <= max) return s
  const last = s.charCodeAt(max - 1)
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)
}

const millis = (iso: unknown): number => {
  const ms = typeof iso === "string" ? Date.parse(iso) : Number.NaN
  return Number.isNaN(ms) ? Number.POSITIVE_INFINITY : ms
}

const usageOf = (v: unknown): Usage | undefined => {
  if (!isRecord(v)) return undefined
  const usage: { input_tokens?: number; output_tokens?: number; cost?: number } = {}
  const input = count(v.input_tokens)
  const output = count(v.output_tokens)
  const cost = count(v.cost)
  if (input !== undefined) usage.input_tokens = input
  if (output !== undefined) usage.output_tokens = output
  if (cost !== undefined) usage.cost = cost
  return usage
}

const nodeOf = (span: StoredSpan): Node => {
  const meta = record(span.metadata)
  const agent = record(meta.agent)
  const aggregate = usageOf(meta.aggregate_usage)
  const startMs = millis(span.started_at)
  const endMs = span.ended_at !== undefined ? millis(span.ended_at) : startMs
  const ownId = text(agent.own_id)
  const ownRole = ownId === undefined ? undefined : text(agent.own_role)
  return {
    span, meta, otel: record(meta.otel), hints: record(meta.trace_hints), startMs,
    endMs: endMs === Number.POSITIVE_INFINITY ? Number.NEGATIVE_INFINITY : endMs,
    isAgent: agent.is_agent_span === true,
    ownId: ownId === undefined ? undefined : cap(ownId, SPAN_TEXT_LIMITS.agent_id),
    ownRole: ownRole === undefined ? undefined : cap(ownRole, SPAN_TEXT_LIMITS.agent_role),
    aggregate, parent: undefined, children: []
  }
}

const byStart = (x: Node, y: Node) => x.startMs - y.startMs || (x.span.id < y.span.id ? -1 : x.span.id > y.span.id ? 1 : 0)

/**
 * Finalizes one OTLP trace from all its stored spans (docs/otel-mapping.md, "Agents" to "Traces"): inherited agent fields,
 * promotion of orphan aggregate usage, the trace row's derived fields and, given `prices`, estimated costs.
 * Pure and total; spans may arrive in any order, and a span whose parent is not among them has no known ancestors.
 */
export const finalizeTrace = (spans: ReadonlyArray<StoredSpan>, prices?: PriceTable): TraceFinalization => {
  const nodes = spans.map(nodeOf)
  const byId = new Map<string, Node>()
  for (const n of nodes) if (!byId.has(n.span.id)) byId.set(n.span.id, n)
  for (const n of nodes) {
    const parent = n.span.parent_id === null ? undefined : byId.get(n.span.parent_id)
    if (parent !== undefined && parent !== n) {
      n.parent = parent
      parent.children.push(n)
    }
  }
  const ordered = [...nodes].sort(byStart)

  const updates = new Map<Node, SpanUpdate>()
  const updateOf = (n: Node) => {
    let u = updates.get(n)
    if (u === undefined) updates.set(n, (u = { id: n.span.id }))
    return u
  }
  resolveAgents(nodes, updateOf)
  stepPayloads(nodes, updateOf)
  const costPromoted = promoteUsage(nodes, updateOf)
  if (prices !== undefined) estimateCosts(nodes, prices, updates, updateOf, costPromoted)

  return { spanUpdates: [...updates.values()], trace: deriveTrace(ordered, byId) }
}

/** "Agents": agent_id/agent_role from the nearest agent span, parent_agent_id from the next distinct agent above. */
const resolveAgents = (nodes: ReadonlyArray<Node>, updateOf: (n: Node) => SpanUpdate) => {
  const limit = nodes.length + 1
  const above = new Map<Node, Node | undefined>()
  // The nearest agent span strictly above `n`, memoized along the walked path; bounded against parent cycles.
  const agentAbove = (n: Node): Node | undefined => {
    if (above.has(n)) return above.get(n)
    const path: Array<Node> = [n]
    let found: Node | undefined
    let cur = n.parent
    for (let steps = 0; cur !== undefined && steps < limit; steps++) {
      if (cur.isAgent) {
        found = cur
        break
      }
      if (above.has(cur)) {
        found = above.get(cur)
        break
      }
      path.push(cur)
      cur = cur.parent
    }
    for (const p of path) above.set(p, found)
    return found
  }
  const identities = new Map<Node, { id: string | undefined; role: string | undefined }>()
  // An agent span's identity: its own, else that of the nearest agent above it that has one.
  const identity = (agent: Node) => {
    let known = identities.get(agent)
    if (known !== undefined) return known
    let cur: Node | undefined = agent
    for (let steps = 0; cur !== undefined && steps < limit; steps++) {
      if (cur.ownId !== undefined) {
        known = { id: cur.ownId, role: cur.ownRole }
        break
      }
      const cached = identities.get(cur)
      if (cached !== undefined) {
        known = cached
        break
      }
      cur = agentAbove(cur)
    }
    known ??= { id: undefined, role: undefined }
    identities.set(agent, known)
    return known
  }

  for (const n of nodes) {
    const a = n.isAgent ? n : agentAbove(n)
    const own = n.ownId !== undefined ? { id: n.ownId, role: n.ownRole } : undefined
    const resolved = own ?? (a !== undefined ? identity(a) : undefined)
    let parentAgentId: string | undefined
    if (a !== undefined) {
      const aId = identity(a).id
      let b = agentAbove(a)
      // A remote-client span and the in-process span of the same agent share an id: skip to a distinct one.
      for (let steps = 0; b !== undefined && identity(b).id === aId && steps < limit; steps++) b = agentAbove(b)
      parentAgentId = b !== undefined ? identity(b).id : undefined
    }
    const id = resolved?.id
    const role = resolved?.role
    // An update cannot clear a column; a value that disappears (which inheritance never causes) stays.
    const changed = (id !== undefined && id !== n.span.agent_id) ||
      (role !== undefined && role !== n.span.agent_role) ||
      (parentAgentId !== undefined && parentAgentId !== n.span.parent_agent_id)
    if (!changed) continue
    const u = updateOf(n)
    if (id !== undefined) u.agent_id = id
    if (role !== undefined) u.agent_role = role
    if (parentAgentId !== undefined) u.parent_agent_id = parentAgentId
  }
}

const toolCallsOf = (v: unknown): ReadonlyArray<unknown> | undefined =>
  isRecord(v) && Array.isArray(v.tool_calls) && v.tool_calls.length > 0 ? v.tool_calls : undefined

/**
 * Frameworks that record a model call's messages and tool calls on the step span wrapping it, not on the call
 * itself (Mastra: `model_step` around `chat <model>`, flagged by the mapping as `metadata.model_step: true`): the
 * call takes its step's input when it has none, and its step's answer when that holds tool calls its own lacks
 * (keeping its own finish reason), so the call can be read and replayed as sent.
 */
const stepPayloads = (nodes: ReadonlyArray<Node>, updateOf: (n: Node) => SpanUpdate) => {
  for (const n of nodes) {
    const step = n.parent
    if (n.span.span_type !== "llm_call" || step === undefined || step.meta.model_step !== true) continue
    if (n.span.input === undefined && step.span.input !== undefined) updateOf(n).input = step.span.input
    const stepCalls = toolCallsOf(step.span.output)
    if (stepCalls !== undefined && toolCallsOf(n.span.output) === undefined) {
      const own = record(n.span.output)
      updateOf(n).output = {
        ...record(step.span.output),
        ...(own.finish_reason === undefined ? {} : { finish_reason: own.finish_reason })
      }
    }
  }
}

/** Children before parents; nodes only reachable through a parent cycle come last. */
const postOrder = (nodes: ReadonlyArray<Node>): Array<Node> => {
  const order: Array<Node> = []
  const seen = new Set<Node>()
  const visit = (start: Node) => {
    const stack: Array<{ node: Node; next: number }> = [{ node: start, next: 0 }]
    seen.add(start)
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!
      const child = top.node.children[top.next++]
      if (child === undefined) {
        order.push(top.node)
        stack.pop()
      } else if (!seen.has(child)) {
        seen.add(child)
        stack.push({ node: child, next: 0 })
      }
    }
  }
  for (const n of nodes) if (n.parent === undefined && !seen.has(n)) visit(n)
  for (const n of nodes) if (!seen.has(n)) visit(n)
  return order
}

/**
 * "Aggregate usage": an aggregate span takes its aggregate usage as its own when no descendant reports any (a remote agent
 * whose model calls are invisible), and gives it back (0) once one does. Tokens and cost are decided apart,
 * so an aggregate cost still counts when the children report tokens without cost. A child reporting zero
 * tokens (streaming without usage) does not count as reporting.
 */
const promoteUsage = (nodes: ReadonlyArray<Node>, updateOf: (n: Node) => SpanUpdate): ReadonlySet<Node> => {
  const promotedCost = new Set<Node>()
  const tokensBelow = new Set<Node>()
  const costBelow = new Set<Node>()
  const hasTokens = new Set<Node>()
  const hasCost = new Set<Node>()
  for (const n of postOrder(nodes)) {
    let tokens = false
    let cost = false
    for (const c of n.children) {
      if (hasTokens.has(c) || tokensBelow.has(c)) tokens = true
      if (hasCost.has(c) || costBelow.has(c)) cost = true
    }
    if (tokens) tokensBelow.add(n)
    if (cost) costBelow.add(n)
    const s = n.span
    const agg = n.aggregate
    if (agg === undefined) {
      if ((s.input_tokens ?? 0) > 0 || (s.output_tokens ?? 0) > 0) hasTokens.add(n)
      if ((s.cost ?? 0) > 0) hasCost.add(n)
      continue
    }
    const promoteTokens = !tokens && (agg.input_tokens !== undefined || agg.output_tokens !== undefined)
    const wantIn = promoteTokens ? agg.input_tokens : s.input_tokens !== undefined ? 0 : undefined
    const wantOut = promoteTokens ? agg.output_tokens : s.output_tokens !== undefined ? 0 : undefined
    const promoteCost = !cost && agg.cost !== undefined
    const wantCost = promoteCost ? agg.cost : s.cost !== undefined ? 0 : undefined
    if (promoteTokens && ((agg.input_tokens ?? 0) > 0 || (agg.output_tokens ?? 0) > 0)) hasTokens.add(n)
    if (promoteCost && agg.cost! > 0) {
      hasCost.add(n)
      promotedCost.add(n)
    }
    if (wantIn !== undefined && wantIn !== s.input_tokens) updateOf(n).input_tokens = wantIn
    if (wantOut !== undefined && wantOut !== s.output_tokens) updateOf(n).output_tokens = wantOut
    if (wantCost !== undefined && wantCost !== s.cost) updateOf(n).cost = wantCost
  }
  return promotedCost
}

/**
 * A span with a model and tokens but no cost (sent or promoted) gets the price table's estimate, marked
 * `cost_estimated`; except below a span whose promoted aggregate cost already counts the calls under it.
 */
const estimateCosts = (
  nodes: ReadonlyArray<Node>,
  prices: PriceTable,
  updates: ReadonlyMap<Node, SpanUpdate>,
  updateOf: (n: Node) => SpanUpdate,
  costPromoted: ReadonlySet<Node>
) => {
  const limit = nodes.length + 1
  const covered = (n: Node) => {
    let cur = n.parent
    for (let steps = 0; cur !== undefined && steps < limit; steps++, cur = cur.parent) {
      if (costPromoted.has(cur)) return true
    }
    return false
  }
  for (const n of nodes) {
    const u = updates.get(n)
    if ((u?.cost ?? n.span.cost) !== undefined || n.span.model === undefined) continue
    const cost = estimatedCost(prices, {
      model: n.span.model,
      input_tokens: u?.input_tokens ?? n.span.input_tokens,
      output_tokens: u?.output_tokens ?? n.span.output_tokens
    })
    if (cost === undefined || covered(n)) continue
    const update = updateOf(n)
    update.cost = cost
    update.cost_estimated = true
  }
}

const sessionId = (raw: string): string =>
  raw.length <= MAX_SESSION_ID ? raw : "sha256:" + createHash("sha256").update(raw, "utf8").digest("hex").slice(0, 56)

/** The first value `pick` finds on the root, then on the spans in start order. */
const firstOf = <A>(root: Node | undefined, ordered: ReadonlyArray<Node>, pick: (n: Node) => A | undefined): A | undefined => {
  if (root !== undefined) {
    const v = pick(root)
    if (v !== undefined) return v
  }
  for (const n of ordered) {
    if (n === root) continue
    const v = pick(n)
    if (v !== undefined) return v
  }
  return undefined
}

/** "Traces": the trace row. A true root (no parent) wins over a local root (remote parent, flags bits 8+9). */
const deriveTrace = (ordered: ReadonlyArray<Node>, byId: ReadonlyMap<string, Node>): TraceFinalization["trace"] => {
  let root = ordered.find((n) => n.span.parent_id === null || n.otel.root === true)
  // A local root whose parent did arrive here is not the top of what we have.
  root ??= ordered.find((n) => n.otel.local_root === true && (n.span.parent_id === null || !byId.has(n.span.parent_id)))

  const status = root === undefined ? "running" : root.otel.failed === true ? "failed" : "completed"
  // The instrumentation's own name for the run (TRACE_NAME_KEYS: a workflow name, an AI SDK functionId), on the root
  // or else on the first span that has one (OpenLLMetry and the AI SDK repeat it on the spans under a plain root, an
  // HTTP request for example); without one, the root span's name.
  const name = root === undefined
    ? null
    : cap(firstOf(root, ordered, (n) => text(n.hints.name)) ?? String(root.span.name), SPAN_TEXT_LIMITS.name)

  // Langfuse trace input: the root's, else the earliest span's; output: the root's, else the latest-ending span's.
  const byEnd = [...ordered].sort((x, y) => y.endMs - x.endMs)
  const llmCalls = ordered.filter((n) => n.span.span_type === "llm_call")
  let input = firstOf(root, ordered, (n) => n.hints.input)
  input ??= root?.span.input
  input ??= llmCalls.find((n) => n.span.input !== undefined)?.span.input
  let output = firstOf(root, byEnd, (n) => n.hints.output)
  output ??= root?.span.output
  output ??= [...llmCalls].sort((x, y) => y.endMs - x.endMs).find((n) => n.span.output !== undefined)?.span.output

  const session = firstOf(root, ordered, (n) => text(n.meta.session_id)) ??
    firstOf(root, ordered, (n) => text(n.hints.resource_session_id))

  const first = ordered[0]
  // An empty list has no start; the epoch keeps the field a valid instant (callers never finalize nothing).
  const startedAt = first === undefined ? new Date(0).toISOString() : first.span.started_at
  let endedAt: string | null = null
  if (root !== undefined) endedAt = root.span.ended_at ?? byEnd.find((n) => n.span.ended_at !== undefined)?.span.ended_at ?? null

  const metadata: Json = {}
  const traceId = firstOf(root, ordered, (n) => text(n.otel.trace_id))
  if (traceId !== undefined) metadata.otel = { trace_id: traceId }
  const service = firstOf(root, ordered, (n) => text(n.otel.service_name))
  if (service !== undefined) metadata.service_name = service
  const user = firstOf(root, ordered, (n) => text(n.meta.user_id))
  if (user !== undefined) metadata.user_id = user
  const tags: Array<string> = []
  for (const n of root === undefined ? ordered : [root, ...ordered]) {
    if (!Array.isArray(n.hints.tags)) continue
    for (const t of n.hints.tags) if (typeof t === "string" && tags.length < MAX_TAGS && !tags.includes(t)) tags.push(t)
  }
  if (tags.length > 0) metadata.tags = tags
  // Sandbox only when a sender says so explicitly (langfuse.environment / deployment.environment.name); any other
  // environment name is kept, and filterable, as metadata.environment.
  const sandbox = ordered.some((n) => text(n.hints.environment)?.trim().toLowerCase() === "sandbox")
  const environmentName = firstOf(root, ordered, (n) => text(n.hints.environment))
  if (sandbox) metadata.environment = "sandbox"
  else if (environmentName !== undefined) metadata.environment = environmentName
  const release = firstOf(root, ordered, (n) => text(n.hints.release))
  if (release !== undefined) metadata.release = release
  const version = firstOf(root, ordered, (n) => text(n.hints.version))
  if (version !== undefined) metadata.version = version
  // Trace metadata from the vendor conventions: every span's, the root's winning on a shared key.
  let sent: Json | undefined
  for (const n of root === undefined ? ordered : [...ordered.filter((o) => o !== root), root]) {
    const m = n.hints.metadata
    if (typeof m === "object" && m !== null && !Array.isArray(m)) sent = { ...sent, ...(m as Json) }
  }
  if (sent !== undefined) metadata.metadata = sent
  const project = firstOf(root, ordered, (n) => text(n.hints.project_id))

  const trace: TraceFinalization["trace"] = {
    name,
    status,
    sessionId: session === undefined ? null : sessionId(session),
    startedAt,
    endedAt,
    metadata,
    environment: sandbox ? "sandbox" : "production"
  }
  if (project !== undefined) trace.projectId = project
  if (input !== undefined) trace.input = input
  if (output !== undefined) trace.output = output
  return trace
}
