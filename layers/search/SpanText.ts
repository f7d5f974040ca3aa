import { shortHash } from "../platform/Hashes.ts"
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
const ENVELOPE_KEYS = new Set(["role", "content", "type", "text", "messages", "message", "value", "data", "id", "index", "name"])

/**
 * The readable text of a JSON payload: string leaves, numbers and booleans, and the keys that carry meaning
 * (argument and field names such as "card_number" or "retry_after"), in document order, stopping at `max`.
 * Long payloads keep their beginning and their end: a conversation's last turn says how it ended.
 */
export const payloadText = (value: unknown, max = PAYLOAD_CHARS): string => {
  if (value === undefined || value === null) return ""
  if (typeof value === "string") return trim(value, max)
  const parts: Array<string> = []
  let size = 0
  const budget = max * 4
  const walk = (v: unknown, depth: number) => {
    if (size > budget || depth > 20) return
    if (typeof v === "string") {
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
 * come first: they are short and say the most). At most about 5 kB, whatever the payload sizes.
 */
export const spanText = (span: SpanTextSource) =>
  [
    span.name,
    TYPE_WORDS[span.span_type] ?? span.span_type,
    span.model ?? "",
    span.error === null ? "" : trim(span.error, ERROR_CHARS),
    payloadText(span.input),
    payloadText(span.output)
  ].filter((s) => s !== "").join("\n")

/** A short, stable digest of a text: a span whose text did not change is not embedded again. */
export const textHash = (text: string) => shortHash(text)
