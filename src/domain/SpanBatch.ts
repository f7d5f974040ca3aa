import { extraFields, type Span } from "./Span.ts"
import { unstorableReason } from "./Json.ts"

/**
 * Why a batch of spans cannot be written, or undefined when it can: ids must be unique within the batch,
 * and every parent_id must name a span of the batch or one of `knownIds` (already stored in the trace).
 */
export const batchProblem = (
  spans: ReadonlyArray<Span>,
  knownIds: ReadonlySet<string> = new Set()
): string | undefined => {
  const ids = new Set<string>()
  for (const [i, span] of spans.entries()) {
    if (ids.has(span.id)) return `spans.${i}.id: duplicate span id ${span.id}`
    ids.add(span.id)
    const extra = extraFields(span)
    const reason = extra && unstorableReason(extra)
    if (reason) return `spans.${i}: an additional property ${reason}`
  }
  for (const [i, span] of spans.entries()) {
    const parent = span.parent_id
    if (parent !== null && !ids.has(parent) && !knownIds.has(parent)) {
      return `spans.${i}.parent_id: ${parent} is not a span of this trace`
    }
  }
  return undefined
}

/** parent_ids that are neither null nor in the batch: they must already exist in the trace. */
export const outsideParents = (spans: ReadonlyArray<Span>): ReadonlyArray<string> => {
  const ids = new Set(spans.map((s) => s.id))
  return [...new Set(spans.flatMap((s) => (s.parent_id !== null && !ids.has(s.parent_id) ? [s.parent_id] : [])))]
}
