import { Effect, Option } from "effect"
import { type ProcessedSpan, spanProcessor } from "tapedeck"

/** What is masked, each with the placeholder that replaces it. */
const PATTERNS: ReadonlyArray<readonly [RegExp, string]> = [
  [/[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g, "[email]"],
  // 13 to 19 digits, optionally grouped by spaces or dashes: card numbers (a Luhn check would let typos through).
  [/\b\d(?:[ -]?\d){12,18}\b/g, "[card]"],
  [/\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}\b/g, "[api-key]"],
  [/\bAKIA[0-9A-Z]{16}\b/g, "[api-key]"],
  [/\bgh[pousr]_[A-Za-z0-9]{20,}\b/g, "[api-key]"]
]

export const redact = (text: string): string => PATTERNS.reduce((t, [pattern, mask]) => t.replace(pattern, mask), text)

/** Every string in a JSON value masked, keys included (an attribute may be named after an e-mail address). */
const redactValue = (value: unknown): unknown => {
  if (typeof value === "string") return redact(value)
  if (Array.isArray(value)) return value.map(redactValue)
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [redact(k), redactValue(v)]))
  }
  return value
}

/** The fields that identify or place a span are kept as they are; everything else a user may have typed is masked. */
const KEPT = new Set(["id", "parent_id", "started_at", "ended_at", "span_type"])

export const redactSpan = (span: ProcessedSpan): ProcessedSpan =>
  Object.fromEntries(Object.entries(span).map(([k, v]) => [k, KEPT.has(k) ? v : redactValue(v)])) as ProcessedSpan

export const PiiRedactorLive = spanProcessor({
  name: "pii-redactor",
  process: (span) => Effect.succeed(Option.some(redactSpan(span)))
})
