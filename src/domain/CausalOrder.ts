/** The timing and parentage of a span, enough to order a trace causally. */
export interface SpanTiming {
  readonly id: string
  readonly parentId: string | null
  readonly startMs: number
  /** ended_at, else started_at + duration_ms, else started_at. */
  readonly endMs: number
}

export interface CausalLayout {
  /** Span ids in a topological order: every parent before its children, siblings by start time. */
  readonly causalOrder: ReadonlyArray<string>
  /** Groups (size ≥ 2) of siblings whose time intervals overlap, each in start order. */
  readonly concurrentGroups: ReadonlyArray<ReadonlyArray<string>>
}

const byStart = (a: SpanTiming, b: SpanTiming) => a.startMs - b.startMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/**
 * Lays out a trace's spans. A span whose parent is not in the trace is a root. Siblings overlap when
 * one starts before the other ends, or when they start at the same instant; overlap is chained, so a
 * group is a maximal run of siblings each overlapping the run before it.
 */
export const layOut = (spans: ReadonlyArray<SpanTiming>): CausalLayout => {
  const ids = new Set(spans.map((s) => s.id))
  const children = new Map<string | null, Array<SpanTiming>>()
  for (const span of spans) {
    const parent = span.parentId !== null && span.parentId !== span.id && ids.has(span.parentId) ? span.parentId : null
    const siblings = children.get(parent)
    if (siblings) siblings.push(span)
    else children.set(parent, [span])
  }
  for (const siblings of children.values()) siblings.sort(byStart)

  const causalOrder: Array<string> = []
  const visited = new Set<string>()
  // Iterative pre-order walk: deep traces must not overflow the stack, and a parent cycle
  // (a → b → a, which no root reaches) is appended afterwards in start order.
  const walk = (rootLevel: ReadonlyArray<SpanTiming>) => {
    const stack = [...rootLevel].reverse()
    while (stack.length > 0) {
      const span = stack.pop()!
      if (visited.has(span.id)) continue
      visited.add(span.id)
      causalOrder.push(span.id)
      const kids = children.get(span.id)
      if (kids) for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]!)
    }
  }
  walk(children.get(null) ?? [])
  if (visited.size < spans.length) walk([...spans].filter((s) => !visited.has(s.id)).sort(byStart))

  const concurrentGroups: Array<Array<string>> = []
  for (const siblings of children.values()) {
    let group: Array<string> = []
    let groupStart = Number.NEGATIVE_INFINITY
    let groupEnd = Number.NEGATIVE_INFINITY
    for (const span of siblings) {
      if (group.length > 0 && (span.startMs < groupEnd || span.startMs === groupStart)) {
        group.push(span.id)
        groupEnd = Math.max(groupEnd, span.endMs)
        continue
      }
      if (group.length >= 2) concurrentGroups.push(group)
      group = [span.id]
      groupStart = span.startMs
      groupEnd = span.endMs
    }
    if (group.length >= 2) concurrentGroups.push(group)
  }
  const position = new Map(causalOrder.map((id, i) => [id, i]))
  concurrentGroups.sort((a, b) => position.get(a[0]!)! - position.get(b[0]!)!)
  return { causalOrder, concurrentGroups }
}
