import type { SpanWire } from "./Span.ts"

/** The recorded spans split at the fork point: what is copied as recorded, and what runs again. */
export interface ReplaySplit {
  /** Spans that happened before the fork point and outside its subtree: copied byte for byte. */
  readonly before: ReadonlyArray<SpanWire>
  /** The fork point, its subtree and everything that started after it, in trace order. */
  readonly after: ReadonlyArray<SpanWire>
}

/**
 * Splits spans (in trace order: start time, then causal position) at the fork point. A span is "before" when
 * it is neither the fork point nor one of its descendants and comes earlier in trace order.
 */
export const splitAtForkPoint = (spans: ReadonlyArray<SpanWire>, forkPointId: string): ReplaySplit | undefined => {
  const index = spans.findIndex((s) => s.id === forkPointId)
  if (index < 0) return undefined
  const children = new Map<string, Array<string>>()
  for (const s of spans) {
    if (s.parent_id === null) continue
    const list = children.get(s.parent_id)
    if (list) list.push(s.id)
    else children.set(s.parent_id, [s.id])
  }
  const subtree = new Set<string>([forkPointId])
  const stack = [forkPointId]
  while (stack.length > 0) {
    for (const child of children.get(stack.pop()!) ?? []) {
      if (!subtree.has(child)) {
        subtree.add(child)
        stack.push(child)
      }
    }
  }
  const before: Array<SpanWire> = []
  const after: Array<SpanWire> = []
  spans.forEach((s, i) => (i < index && !subtree.has(s.id) ? before : after).push(s))
  return { before, after }
}

interface Message {
  readonly role: string
  readonly content: unknown
  readonly [key: string]: unknown
}

const isMessages = (u: unknown): u is ReadonlyArray<Message> =>
  Array.isArray(u) && u.length > 0 && u.every((m) => typeof m === "object" && m !== null && typeof (m as Message).role === "string")

const asText = (u: unknown) => (typeof u === "string" ? u : JSON.stringify(u))

/** Chat messages from whatever a span recorded as its input (messages, a string, or any JSON). */
export const recordedMessages = (input: unknown): ReadonlyArray<Message> => {
  if (isMessages(input)) return input
  const wrapped = input as { messages?: unknown } | null
  if (wrapped && typeof wrapped === "object" && isMessages(wrapped.messages)) return wrapped.messages
  return input === undefined ? [] : [{ role: "user", content: asText(input) }]
}

/**
 * The messages of the first model call at the fork point: the modified input itself when it is a list of
 * messages; otherwise the recorded messages with the last user message replaced by it.
 */
export const messagesAtForkPoint = (recorded: unknown, modified: unknown): ReadonlyArray<Message> => {
  if (isMessages(modified)) return modified
  const messages = [...recordedMessages(recorded)]
  const last = messages.map((m) => m.role).lastIndexOf("user")
  const replacement = { role: "user", content: asText(modified) }
  if (last < 0) return [...messages, replacement]
  messages[last] = replacement
  return messages
}

/** Later model calls keep their recorded messages and see the modified input as a leading system message. */
export const messagesAfterForkPoint = (recorded: unknown, modified: unknown): ReadonlyArray<Message> => [
  { role: "system", content: `This run was replayed from a fork with a modified input: ${asText(modified)}` },
  ...recordedMessages(recorded)
]
