import { layOut } from "../../../../domain/CausalOrder.ts"
import type { Span } from "../../../../domain/Span.ts"
import { type InstantLike, millis } from "../../format.ts"

/** The parts of a span the views read: a span as the API sends it has them all (tests build smaller ones). */
export type SpanLike = Pick<Span, "span_type" | "name"> & {
  readonly id: string
  readonly parent_id: string | null
  readonly started_at: InstantLike
  readonly ended_at?: InstantLike | undefined
  readonly duration_ms?: number | undefined
  readonly input_tokens?: number | undefined
  readonly output_tokens?: number | undefined
  readonly cost?: string | number | undefined
  readonly error?: string | undefined
  readonly metadata?: { readonly [key: string]: unknown } | undefined
}

/** A subtree's totals: its spans, tokens, cost, errors, and the latest end among them. */
export interface Rollup {
  spans: number
  tokens: number
  cost: number
  errors: number
  endMs: number
}

/** One span in the tree, with what every view needs precomputed. */
export interface SpanNode<S extends SpanLike = SpanLike> {
  readonly span: S
  readonly id: string
  readonly parent: SpanNode<S> | undefined
  readonly children: Array<SpanNode<S>>
  readonly depth: number
  /** Position in the causal order (parents before children, siblings by start). */
  readonly causalIndex: number
  readonly startMs: number
  readonly endMs: number
  /** The concurrent group (siblings whose intervals overlap) this span is in, when it is in one. */
  readonly group: number | undefined
  readonly isError: boolean
  readonly isForkPoint: boolean
  readonly isEnforcement: boolean
  readonly rollup: Rollup
}

export interface SpanTree<S extends SpanLike = SpanLike> {
  readonly roots: ReadonlyArray<SpanNode<S>>
  /** Every node in causal order. */
  readonly nodes: ReadonlyArray<SpanNode<S>>
  readonly byId: ReadonlyMap<string, SpanNode<S>>
  /** The earliest start and the latest end of the trace's spans (the timeline's extent). */
  readonly startMs: number
  readonly endMs: number
  readonly groups: ReadonlyArray<ReadonlyArray<string>>
}

const spanEnd = (span: SpanLike, startMs: number) => {
  const ended = millis(span.ended_at)
  if (ended !== undefined) return Math.max(startMs, ended)
  return startMs + (span.duration_ms ?? 0)
}

const costOf = (cost: string | number | undefined) => {
  const n = typeof cost === "number" ? cost : cost === undefined ? 0 : Number(cost)
  return Number.isFinite(n) ? n : 0
}

/**
 * Builds the span tree of a trace. The order is the server's `causalOrder` when given (the trace detail has it),
 * else the same layout computed here (spans that arrived live); a span whose parent is missing is a root, and so is
 * one caught in a parent cycle, so every span appears exactly once.
 */
export const buildSpanTree = <S extends SpanLike>(
  spans: ReadonlyArray<S>,
  layout?: {
    readonly causalOrder: ReadonlyArray<string>
    readonly concurrentGroups: ReadonlyArray<ReadonlyArray<string>>
  }
): SpanTree<S> => {
  const timings = new Map<string, { startMs: number; endMs: number }>()
  const spanById = new Map<string, S>()
  for (const span of spans) {
    const startMs = millis(span.started_at) ?? 0
    timings.set(span.id, { startMs, endMs: spanEnd(span, startMs) })
    spanById.set(span.id, span)
  }
  const fresh =
    layout === undefined ||
    layout.causalOrder.length !== spanById.size ||
    layout.causalOrder.some((id) => !spanById.has(id))
      ? layOut(spans.map((span) => ({ id: span.id, parentId: span.parent_id, ...timings.get(span.id)! })))
      : layout
  const groupOf = new Map<string, number>()
  fresh.concurrentGroups.forEach((group, index) => group.forEach((id) => groupOf.set(id, index)))

  const byId = new Map<string, SpanNode<S>>()
  const nodes: Array<SpanNode<S>> = []
  const roots: Array<SpanNode<S>> = []
  // The causal order puts every parent before its children, so one pass links them; a parent not yet seen
  // (missing, or in a cycle) makes the span a root.
  fresh.causalOrder.forEach((id, causalIndex) => {
    const span = spanById.get(id)
    if (span === undefined || byId.has(id)) return
    const parent = span.parent_id === null ? undefined : byId.get(span.parent_id)
    const { startMs, endMs } = timings.get(id)!
    const isError = span.error !== undefined || span.span_type === "error"
    const node: SpanNode<S> = {
      span,
      id,
      parent,
      children: [],
      depth: parent === undefined ? 0 : parent.depth + 1,
      causalIndex,
      startMs,
      endMs,
      group: groupOf.get(id),
      isError,
      isForkPoint: span.span_type === "fork_point",
      isEnforcement: span.metadata !== undefined && span.metadata !== null && "enforcement" in span.metadata,
      rollup: {
        spans: 1,
        tokens: (span.input_tokens ?? 0) + (span.output_tokens ?? 0),
        cost: costOf(span.cost),
        errors: isError ? 1 : 0,
        endMs
      }
    }
    byId.set(id, node)
    nodes.push(node)
    if (parent === undefined) roots.push(node)
    else parent.children.push(node)
  })
  // Roll-ups, children before parents: the reverse causal order.
  for (let i = nodes.length - 1; i >= 0; i--) {
    const node = nodes[i]!
    const parent = node.parent
    if (parent === undefined) continue
    parent.rollup.spans += node.rollup.spans
    parent.rollup.tokens += node.rollup.tokens
    parent.rollup.cost += node.rollup.cost
    parent.rollup.errors += node.rollup.errors
    parent.rollup.endMs = Math.max(parent.rollup.endMs, node.rollup.endMs)
  }
  let startMs = Infinity
  let endMs = -Infinity
  for (const node of nodes) {
    startMs = Math.min(startMs, node.startMs)
    endMs = Math.max(endMs, node.endMs)
  }
  if (nodes.length === 0) startMs = endMs = 0
  return { roots, nodes, byId, startMs, endMs, groups: fresh.concurrentGroups }
}

/** The rows shown: every node in causal order, less the descendants of collapsed ones. */
export const visibleRows = <S extends SpanLike>(
  tree: SpanTree<S>,
  collapsed: ReadonlySet<string>
): Array<SpanNode<S>> => {
  if (collapsed.size === 0) return tree.nodes.slice()
  const rows: Array<SpanNode<S>> = []
  let hiddenBelow = -1
  for (const node of tree.nodes) {
    // Causal order is a pre-order walk: a collapsed node's descendants follow it, deeper than it.
    if (hiddenBelow >= 0) {
      if (node.depth > hiddenBelow) continue
      hiddenBelow = -1
    }
    rows.push(node)
    if (collapsed.has(node.id) && node.children.length > 0) hiddenBelow = node.depth
  }
  return rows
}

/** The ids to collapse so that `id` is visible: none of its ancestors stays collapsed. */
export const revealing = (tree: SpanTree, collapsed: ReadonlySet<string>, id: string): Set<string> => {
  const next = new Set(collapsed)
  for (let node = tree.byId.get(id)?.parent; node !== undefined; node = node.parent) next.delete(node.id)
  return next
}

export type TreeKey = "ArrowUp" | "ArrowDown" | "ArrowLeft" | "ArrowRight" | "Home" | "End" | "PageUp" | "PageDown"

/**
 * What a key does in the tree (the WAI-ARIA tree pattern): up and down move among visible rows, right expands a
 * collapsed span or moves to its first child, left collapses an expanded one or moves to its parent.
 */
export const treeKey = (
  rows: ReadonlyArray<SpanNode>,
  collapsed: ReadonlySet<string>,
  selected: string | undefined,
  key: TreeKey,
  page = 20
): { readonly select?: string; readonly collapse?: string; readonly expand?: string } => {
  if (rows.length === 0) return {}
  const at = selected === undefined ? -1 : rows.findIndex((row) => row.id === selected)
  const to = (index: number) => ({ select: rows[Math.max(0, Math.min(rows.length - 1, index))]!.id })
  if (at < 0) return to(0)
  const node = rows[at]!
  switch (key) {
    case "ArrowDown":
      return to(at + 1)
    case "ArrowUp":
      return to(at - 1)
    case "PageDown":
      return to(at + page)
    case "PageUp":
      return to(at - page)
    case "Home":
      return to(0)
    case "End":
      return to(rows.length - 1)
    case "ArrowRight":
      if (node.children.length === 0) return {}
      return collapsed.has(node.id) ? { expand: node.id } : { select: node.children[0]!.id }
    case "ArrowLeft":
      if (node.children.length > 0 && !collapsed.has(node.id)) return { collapse: node.id }
      return node.parent === undefined ? {} : { select: node.parent.id }
  }
}
