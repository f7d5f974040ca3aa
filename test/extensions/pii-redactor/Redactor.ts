import { Effect, Option } from "effect"
import { type ProcessedSpan, spanProcessor } from "tapedeck"

/** What is masked, each with the placeholder that replaces it. */
const PATTERNS: ReadonlyArray<readonly [string, string]> = [
  ["[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}", "[email]"],
  // 13 to 19 digits, optionally grouped by spaces or dashes: card numbers (a Luhn check would let typos through).
  ["\\b\\d(?:[ -]?\\d){12,18}\\b", "[card]"],
  ["\\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}\\b", "[api-key]"],
  ["\\bAKIA[0-9A-Z]{16}\\b", "[api-key]"],
  ["\\bgh[pousr]_[A-Za-z0-9]{20,}\\b", "[api-key]"]
]

/** One pass over a text for all the patterns (a group each; the earlier pattern wins where two start together). */
const ANY = new RegExp(PATTERNS.map(([pattern]) => `(${pattern})`).join("|"), "g")

export const redact = (text: string): string =>
  text.replace(ANY, (...groups: Array<unknown>) => {
    for (let i = 0; i < PATTERNS.length; i++) if (groups[i + 1] !== undefined) return PATTERNS[i]![1]
    return ""
  })

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
