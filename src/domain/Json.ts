import { Schema } from "effect"

/** How deeply a stored JSON value may nest; PostgreSQL's jsonb parser has a stack limit of its own. */
export const MAX_JSON_DEPTH = 64

/** Whether PostgreSQL can store the string (no NUL, no unpaired surrogate). */
export const isStorableText = (s: string) => !s.includes("\u0000") && s.isWellFormed()

/**
 * Why a JSON value cannot be stored as PostgreSQL jsonb/text, or undefined when it can:
 * NUL characters and lone surrogates are refused by PostgreSQL, so they are refused here with a 400
 * instead of failing later as a 500.
 */
export const unstorableReason = (value: unknown, depth = 0): string | undefined => {
  if (typeof value === "string") {
    return isStorableText(value) ? undefined : "contains a NUL character or an unpaired surrogate"
  }
  // JSON.parse turns 1e400 into Infinity, which JSON.stringify would silently store as null.
  if (typeof value === "number") return Number.isFinite(value) ? undefined : "contains a number too large for a double"
  if (value === null || typeof value !== "object") return undefined
  if (depth >= MAX_JSON_DEPTH) return `nests deeper than ${MAX_JSON_DEPTH} levels`
  if (Array.isArray(value)) {
    for (const item of value) {
      const reason = unstorableReason(item, depth + 1)
      if (reason) return reason
    }
    return undefined
  }
  // for…in, not Object.entries: no array of pairs per object (this walks every payload of every span written).
  for (const key in value) {
    if (!isStorableText(key)) return "has a key with a NUL character or an unpaired surrogate"
    const reason = unstorableReason((value as Record<string, unknown>)[key], depth + 1)
    if (reason) return reason
  }
  return undefined
}

/** Any JSON value that PostgreSQL can store. */
export const JsonValue = Schema.Unknown.pipe(
  Schema.filter((u) => unstorableReason(u)),
  Schema.annotations({
    identifier: "JsonValue",
    jsonSchema: { description: "Any JSON value: object, array, string, number, boolean or null" }
  })
)

/** A free-form JSON object that PostgreSQL can store. */
export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown }).pipe(
  Schema.filter((u) => unstorableReason(u)),
  Schema.annotations({
    identifier: "JsonObject",
    jsonSchema: { description: "A JSON object of your own keys and values" }
  })
)

/** Text that PostgreSQL can store, at most `max` characters. */
export const Text = (max: number) =>
  Schema.String.pipe(
    Schema.maxLength(max),
    Schema.filter((s) => isStorableText(s) || "must not contain NUL characters or unpaired surrogates")
  )

/** A JSON integer that fits the `bigint` columns and JavaScript's safe range. */
export const Count = Schema.Int.pipe(Schema.between(0, Number.MAX_SAFE_INTEGER))

/**
 * A per-span count (tokens, milliseconds): at most 10^12, so the sums over a trace's spans stay exact
 * JavaScript integers.
 */
export const MAX_SPAN_COUNT = 1e12
export const SpanCount = Schema.Int.pipe(Schema.between(0, MAX_SPAN_COUNT))

/** A non-negative finite amount (money, usually USD). */
export const MAX_AMOUNT = 1e15
export const Amount = Schema.Number.pipe(Schema.finite(), Schema.between(0, MAX_AMOUNT))
