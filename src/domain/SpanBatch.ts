import { extraFields, type Span } from "./Span.ts"
import { unstorableReason } from "./Json.ts"

/** UUIDs compare case-insensitively (PostgreSQL stores them lowercase). */
const key = (id: string) => id.toLowerCase()

/**
 * Why a batch of spans cannot be written, or undefined when it can: ids must be unique within the batch,
 * every parent_id must name a span of the batch or of `stored` (the trace's stored spans: id → parent id),
 * and no span may end up its own ancestor.
 */
export const batchProblem = (
  spans: ReadonlyArray<Span>,
  stored: ReadonlyMap<string, string | null> = new Map()
): string | undefined => {
  const parents = new Map<string, string | null>(stored)
  const seen = new Set<string>()
  // Each id and parent id lowercased once (this runs for every span written).
  const ids: Array<string> = new Array(spans.length)
  const parentIds: Array<string | null> = new Array(spans.length)
  for (let i = 0; i < spans.length; i++) {
    const span = spans[i]!
    const id = key(span.id)
    if (seen.has(id)) return `spans.${i}.id: duplicate span id ${span.id}`
    seen.add(id)
    ids[i] = id
    const parent = span.parent_id === null ? null : key(span.parent_id)
    parentIds[i] = parent
    parents.set(id, parent)
    const extra = extraFields(span)
    const reason = extra && unstorableReason(extra)
    if (reason) return `spans.${i}: an additional property ${reason}`
  }
  for (let i = 0; i < spans.length; i++) {
    const id = ids[i]!
    const parent = parentIds[i] ?? null
    if (parent !== null && !parents.has(parent))
      return `spans.${i}.parent_id: ${spans[i]!.parent_id} is not a span of this trace`
    // Walk up from the span: reaching it again means a cycle. Each walk is bounded by the span count.
    let steps = 0
    for (let at = parent; at !== null && steps <= parents.size; at = parents.get(at) ?? null, steps++) {
      if (at === id) return `spans.${i}.parent_id: ${spans[i]!.parent_id} would make the span its own ancestor`
    }
  }
  return undefined
}
