import { estimatedCost, type PriceTable } from "#src/domain/pricing/Prices"
import {
  byStart,
  isRecord,
  type Node,
  nodeOf,
  record,
  type SpanUpdate,
  type StoredSpan,
  type TraceFinalization
} from "./FinalizeNodes.ts"
import { deriveTrace } from "./TraceSummary.ts"

export type { StoredSpan, TraceFinalization } from "./FinalizeNodes.ts"

/**
 * Finalizes one OTLP trace from all its stored spans (docs/otel-mapping.md, "Agents" to "Traces"): inherited agent
 * fields, promotion of orphan aggregate usage, the trace row's derived fields and, given `prices`, estimated costs.
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
  const { agentAbove, identity } = agentLookups(nodes)
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
    const changed =
      (id !== undefined && id !== n.span.agent_id) ||
      (role !== undefined && role !== n.span.agent_role) ||
      (parentAgentId !== undefined && parentAgentId !== n.span.parent_agent_id)
    if (!changed) continue
    const u = updateOf(n)
    if (id !== undefined) u.agent_id = id
    if (role !== undefined) u.agent_role = role
    if (parentAgentId !== undefined) u.parent_agent_id = parentAgentId
  }
}

/** The nearest agent above a node and an agent's identity, memoized over one trace; bounded against parent cycles. */
const agentLookups = (nodes: ReadonlyArray<Node>) => {
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
  return { agentAbove, identity }
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
 * "Aggregate usage": an aggregate span takes its aggregate usage as its own when no descendant reports any (a remote
 * agent whose model calls are invisible), and gives it back (0) once one does. Tokens and cost are decided apart,
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
