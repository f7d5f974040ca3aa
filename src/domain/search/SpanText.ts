/** What an indexed span is made of (the stored columns the text is built from). */
export interface SpanTextSource {
  readonly name: string
  readonly span_type: string
  readonly model: string | null
  readonly input: unknown
  readonly output: unknown
  readonly error: string | null
}

/** Longest text taken from one payload (input or output), and from an error. */
export const PAYLOAD_CHARS = 1500
export const ERROR_CHARS = 1000

// Keys that say nothing about what happened (chat envelopes); their values are kept.
const ENVELOPE_KEYS = new Set([
  "role",
  "content",
  "type",
  "text",
  "messages",
  "message",
  "value",
  "data",
  "id",
  "index",
  "name"
])

/**
 * The readable text of a JSON payload: string leaves, numbers and booleans, and the keys that carry meaning
 * (argument and field names such as "card_number" or "retry_after"), in document order, stopping at `max`.
 * Long payloads keep their beginning and their end: a conversation's last turn says how it ended.
 */
export const payloadText = (value: unknown, max = PAYLOAD_CHARS, skip?: ReadonlySet<string>): string => {
  if (value === undefined || value === null) return ""
  if (typeof value === "string") return skip?.has(value) ? "" : trim(value, max)
  const parts: Array<string> = []
  let size = 0
  const budget = max * 4
  const walk = (v: unknown, depth: number) => {
    if (size > budget || depth > 20) return
    if (typeof v === "string") {
      if (skip?.has(v)) return
      parts.push(v)
      size += v.length + 1
    } else if (typeof v === "number" || typeof v === "boolean") {
      const s = String(v)
      parts.push(s)
      size += s.length + 1
    } else if (Array.isArray(v)) {
      for (const item of v) walk(item, depth + 1)
    } else if (typeof v === "object" && v !== null) {
      for (const [key, item] of Object.entries(v)) {
        if (!ENVELOPE_KEYS.has(key)) {
          parts.push(key)
          size += key.length + 1
        }
        walk(item, depth + 1)
      }
    }
  }
  walk(value, 0)
  return trim(parts.join(" "), max)
}

const trim = (text: string, max: number) => {
  if (text.length <= max) return text
  const head = Math.floor(max * 0.7)
  return `${text.slice(0, head)} … ${text.slice(text.length - (max - head))}`
}

const TYPE_WORDS: Record<string, string> = {
  llm_call: "model call",
  tool_call: "tool call",
  tool_result: "tool result",
  reasoning: "reasoning",
  action: "action",
  error: "error",
  fork_point: "fork point"
}

/**
 * The text embedded for a span: its name, type, model, error, input and output, each trimmed (name and error
 * come first: they are short and say the most). At most about 5 kB, whatever the payload sizes. `input` may be
 * replaced by what is new in it (see `traceSpanTexts`), and string leaves in `skip` are left out of it.
 */
export const spanText = (span: SpanTextSource, skip?: ReadonlySet<string>) =>
  [
    span.name,
    TYPE_WORDS[span.span_type] ?? span.span_type,
    span.model ?? "",
    span.error === null ? "" : trim(span.error, ERROR_CHARS),
    payloadText(span.input, PAYLOAD_CHARS, skip),
    payloadText(span.output)
  ]
    .filter((s) => s !== "")
    .join("\n")

/** A string at least this long that an earlier span of the trace holds is not indexed again by a model call. */
export const REPEATED_MIN_CHARS = 64

/** Roles of the model's own turns in a chat history (OpenAI and Anthropic, Gemini). */
const MODEL_ROLES = new Set(["assistant", "model"])
/** Roles of the instructions a conversation starts with. */
const SYSTEM_ROLES = new Set(["system", "developer"])

const isMessage = (v: unknown): v is { readonly role: unknown } =>
  typeof v === "object" && v !== null && !Array.isArray(v) && typeof (v as { role?: unknown }).role === "string"

/** The chat messages of a model call's input: the input itself when it is a list of messages, or its `messages`. */
const chatMessages = (input: unknown): ReadonlyArray<{ readonly role: unknown }> | undefined => {
  const list = Array.isArray(input)
    ? input
    : typeof input === "object" && input !== null && Array.isArray((input as { messages?: unknown }).messages)
      ? (input as { messages: Array<unknown> }).messages
      : undefined
  return list !== undefined && list.length > 0 && list.every(isMessage) ? list : undefined
}

/**
 * What is new in a model call's input: when its history holds a turn of the model, the system messages and the
 * messages after the model's last turn (the earlier turns, and the request's other fields such as tool schemas,
 * were in the calls before it); otherwise the whole input (the first call of a conversation).
 */
export const newInput = (input: unknown): unknown => {
  const messages = chatMessages(input)
  if (messages === undefined) return input
  let last = -1
  for (let i = messages.length - 1; i >= 0; i--) {
    if (MODEL_ROLES.has(messages[i]!.role as string)) {
      last = i
      break
    }
  }
  if (last < 0) return input
  return messages.filter((m, i) => i > last || SYSTEM_ROLES.has(m.role as string))
}

/** Adds the string leaves of `value` at least REPEATED_MIN_CHARS long to `into`. */
const addLongStrings = (value: unknown, into: Set<string>, depth = 0) => {
  if (depth > 20) return
  if (typeof value === "string") {
    if (value.length >= REPEATED_MIN_CHARS) into.add(value)
  } else if (Array.isArray(value)) {
    for (const item of value) addLongStrings(item, into, depth + 1)
  } else if (typeof value === "object" && value !== null) {
    for (const item of Object.values(value)) addLongStrings(item, into, depth + 1)
  }
}

/** A span of a trace as `traceSpanTexts` reads it. */
export interface TraceSpanTextSource extends SpanTextSource {
  readonly trace_id: string
  readonly id: string
  /** Epoch milliseconds (the order in which the trace's spans are read). */
  readonly started_at: number
}

/**
 * The texts of spans read by whole traces (in the order given). A model call (`llm_call`) carries the whole
 * conversation so far, so its input is indexed for what is new in it (`newInput`), and of that, long strings an
 * earlier span of the same trace holds (by start time, then id) are left out: a tool result its tool span recorded,
 * a system prompt the trace's first model call indexed. Every other span's text is `spanText` of the span itself.
 * A phrase of the conversation is thus still found in the trace, in the span where it first appeared.
 */
export const traceSpanTexts = (spans: ReadonlyArray<TraceSpanTextSource>): Array<string> => {
  const texts = new Array<string>(spans.length)
  const byTrace = new Map<string, Array<number>>()
  spans.forEach((s, i) => {
    const list = byTrace.get(s.trace_id)
    if (list === undefined) byTrace.set(s.trace_id, [i])
    else list.push(i)
  })
  for (const order of byTrace.values()) {
    order.sort((a, b) => spans[a]!.started_at - spans[b]!.started_at || (spans[a]!.id < spans[b]!.id ? -1 : 1))
    const seen = new Set<string>()
    for (const i of order) {
      const span = spans[i]!
      if (span.span_type === "llm_call") {
        const input = newInput(span.input)
        texts[i] = spanText({ ...span, input }, seen)
        addLongStrings(input, seen)
      } else {
        texts[i] = spanText(span)
        addLongStrings(span.input, seen)
      }
      addLongStrings(span.output, seen)
    }
  }
  return texts
}
