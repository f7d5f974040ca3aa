import { MAX_JSON_DEPTH } from "#src/domain/Json"
import { MAX_META_LONG_TEXT, MAX_META_TEXT } from "./Limits.ts"

/**
 * Text and JSON-like values made storable: NUL characters and unpaired surrogates replaced (PostgreSQL refuses
 * them), strings cut without splitting a pair, values copied within a size budget.
 */

export type Json = Record<string, unknown>

export const OVERFLOW: unique symbol = Symbol("overflow")

export interface Budget {
  left: number
  readonly maxString: number
}

export const isRecord = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/** Replaces NUL characters and unpaired surrogates, which PostgreSQL refuses. */
export const cleanText = (s: string): string => {
  let t = s
  if (t.indexOf("\u0000") !== -1) t = t.replaceAll("\u0000", "\uFFFD")
  return t.isWellFormed() ? t : t.toWellFormed()
}

/** At most `max` UTF-16 units without splitting a surrogate pair, and storable. */
export const fitText = (s: string, max: number): string => {
  if (s.length <= max) return cleanText(s)
  let end = max
  const last = s.charCodeAt(end - 1)
  if (last >= 0xd800 && last <= 0xdbff) end -= 1
  return cleanText(s.slice(0, end))
}

export const safeStringify = (v: unknown): string => {
  try {
    return JSON.stringify(v) ?? "null"
  } catch {
    // A cycle or a stack overflow on absurd nesting: keep a marker rather than fail the span.
    return '"[unserialisable]"'
  }
}

/** Writes a key even when it is `__proto__` (attribute keys are arbitrary strings). */
export const setKey = (target: Json, key: string, value: unknown) => {
  if (key === "__proto__")
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
  else target[key] = value
}

/**
 * A storable copy of a JSON-like value: strings cleaned and capped, non-finite numbers as strings, nesting
 * folded into a string at the jsonb depth limit. Copy-on-write, so clean input allocates nothing.
 * `OVERFLOW` when the budget (approximate serialised characters) runs out.
 */
export const cleanValue = (v: unknown, depth: number, b: Budget): unknown => {
  switch (typeof v) {
    case "string": {
      if (v.length > b.maxString) {
        const cut = fitText(v, b.maxString)
        b.left -= cut.length + 2
        return b.left < 0 ? OVERFLOW : cut
      }
      b.left -= v.length + 2
      return b.left < 0 ? OVERFLOW : cleanText(v)
    }
    case "number":
      b.left -= 8
      // -0 would not survive JSON; NaN and ±Infinity are not JSON at all.
      return v === 0 ? 0 : Number.isFinite(v) ? v : String(v)
    case "boolean":
      b.left -= 5
      return v
    case "bigint": {
      const s = v.toString()
      b.left -= s.length
      return s
    }
    case "object":
      break
    default:
      return undefined
  }
  if (v === null) {
    b.left -= 4
    return null
  }
  if (b.left < 0) return OVERFLOW
  if (depth >= MAX_JSON_DEPTH) {
    const folded = fitText(safeStringify(v), Math.min(b.maxString, MAX_META_LONG_TEXT))
    b.left -= folded.length + 2
    return b.left < 0 ? OVERFLOW : folded
  }
  if (Array.isArray(v)) {
    let out: Array<unknown> | undefined
    b.left -= 2
    for (let i = 0; i < v.length; i++) {
      const item: unknown = v[i]
      let c = cleanValue(item, depth + 1, b)
      if (c === OVERFLOW) return OVERFLOW
      if (c === undefined) c = null
      b.left -= 1
      if (out === undefined && !Object.is(c, item)) out = v.slice(0, i)
      if (out !== undefined) out.push(c)
    }
    return out ?? v
  }
  if (v instanceof Date) {
    const t = Number.isNaN(v.getTime()) ? "Invalid Date" : v.toISOString()
    b.left -= t.length + 2
    return t
  }
  const keys = Object.keys(v)
  let out: Json | undefined
  b.left -= 2
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    const item = (v as Json)[key]
    const c = cleanValue(item, depth + 1, b)
    if (c === OVERFLOW) return OVERFLOW
    const k = key.indexOf("\u0000") === -1 && key.isWellFormed() ? key : cleanText(key)
    b.left -= key.length + 4
    if (out === undefined && (!Object.is(c, item) || k !== key)) {
      out = {}
      for (let j = 0; j < i; j++) setKey(out, keys[j]!, (v as Json)[keys[j]!])
    }
    if (out !== undefined && c !== undefined) setKey(out, k, c)
  }
  if (b.left < 0) return OVERFLOW
  return out ?? v
}

/** A storable value within `maxChars`; an oversized one becomes its truncated serialisation. */
export const fitValue = (
  v: unknown,
  depth: number,
  maxChars: number,
  maxString = maxChars
): { value: unknown; cut: boolean } => {
  const c = cleanValue(v, depth, { left: maxChars, maxString })
  if (c !== OVERFLOW) return { value: c === undefined ? null : c, cut: false }
  return { value: fitText(typeof v === "string" ? v : safeStringify(v), maxChars), cut: true }
}

export const small = (v: unknown): unknown => fitValue(v, 3, 4 * MAX_META_LONG_TEXT, MAX_META_LONG_TEXT).value

export const metaText = (v: string | undefined, max = MAX_META_TEXT) => (v === undefined ? undefined : fitText(v, max))

export const put = (target: Json, key: string, value: unknown) => {
  if (value !== undefined) target[key] = value
}
