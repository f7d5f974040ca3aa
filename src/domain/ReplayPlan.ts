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
  Array.isArray(u) &&
  u.length > 0 &&
  u.every((m) => typeof m === "object" && m !== null && typeof (m as Message).role === "string")

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

/**
 * Request fields a Chat Completions provider accepts, which replay sends again when the recording has them; also the
 * optional fields the model client writes on the wire (LlmClient's CHAT_REQUEST_OPTIONS), in this order.
 */
export const REPLAYABLE = [
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "temperature",
  "max_tokens",
  "top_p",
  "frequency_penalty",
  "presence_penalty",
  "stop",
  "seed",
  "n",
  "response_format"
] as const
/** Request fields recorded by some conventions that a Chat Completions request cannot carry. */
const NOT_REPLAYABLE = ["top_k"] as const

export type ReplayableParameter = (typeof REPLAYABLE)[number]

/** What a recorded llm_call input says about its request beyond the messages. */
export interface RecordedRequest {
  /** The fields to send again, under their Chat Completions names. */
  readonly parameters: Partial<Record<ReplayableParameter, unknown>>
  /** Recorded fields that cannot be sent again, by name. */
  readonly unreproducible: ReadonlyArray<string>
}

/**
 * The request parameters stored with an llm_call's input (`{messages, tools, temperature, …}`, as ingestion
 * writes them and as the Traces API accepts them). A plain message list has none.
 */
export const recordedRequest = (input: unknown): RecordedRequest => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return { parameters: {}, unreproducible: [] }
  const record = input as Record<string, unknown>
  if (!isMessages(record.messages) && !Array.isArray(record.messages)) return { parameters: {}, unreproducible: [] }
  const parameters: Partial<Record<ReplayableParameter, unknown>> = {}
  for (const name of REPLAYABLE) {
    const value = record[name]
    if (value !== undefined && value !== null) parameters[name] = value
  }
  return {
    parameters,
    unreproducible: NOT_REPLAYABLE.filter((name) => record[name] !== undefined && record[name] !== null)
  }
}

/**
 * For an SDK-mode replay: the recorded request parameters (tools, tool_choice, temperature, …) of every
 * llm_call that has some, by span id, so the SDK can hand them to its model client as the server would.
 */
export const modelRequests = (spans: ReadonlyArray<SpanWire>): Record<string, RecordedRequest["parameters"]> => {
  const out: Record<string, RecordedRequest["parameters"]> = {}
  for (const span of spans) {
    if (span.span_type !== "llm_call") continue
    const { parameters } = recordedRequest(span.input)
    if (Object.keys(parameters).length > 0) out[span.id] = parameters
  }
  return out
}
