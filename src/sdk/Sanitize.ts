/**
 * Turning whatever the agent hands us into JSON the service will store.
 *
 * The service refuses (400) NUL characters, unpaired UTF-16 surrogates, non-finite numbers, JSON nested
 * deeper than 64 levels and over-long names; a refused batch is lost whole. So every value is copied into a
 * plain JSON-safe snapshot when it is recorded: strings are repaired, cycles, BigInts, Dates, Errors, Maps,
 * Sets and binary data are given a JSON form, and a payload larger than its budget is cut short with
 * visible markers. The copy is also a snapshot: the agent may mutate its objects afterwards.
 *
 * Nothing here throws: a getter or toJSON that throws becomes a marker string.
 */

/** Deeper objects and arrays are replaced by a marker (the service accepts 64 levels). */
export const MAX_DEPTH = 48

export const TRUNCATED = "[truncated]"

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

type WellFormed = { isWellFormed?: () => boolean }

const isWellFormed = (s: string): boolean => {
  const native = (s as unknown as WellFormed).isWellFormed
  if (typeof native === "function") return native.call(s)
  LONE_SURROGATE.lastIndex = 0
  const bad = LONE_SURROGATE.test(s)
  LONE_SURROGATE.lastIndex = 0
  return !bad
}

/** Text the service can store: NUL and unpaired surrogates become U+FFFD; at most `max` UTF-16 units. */
export const cleanText = (value: string, max?: number): string => {
  let s = value
  if (max !== undefined && s.length > max) {
    s = s.slice(0, max)
    // Do not leave half a surrogate pair at the cut.
    const last = s.charCodeAt(s.length - 1)
    if (last >= 0xd800 && last <= 0xdbff) s = s.slice(0, -1)
  }
  if (s.includes("\u0000")) s = s.replace(/\u0000/g, "\uFFFD")
  if (!isWellFormed(s)) s = s.replace(LONE_SURROGATE, "\uFFFD")
  return s
}

/** A string for any value, for names and error texts. */
export const textOf = (value: unknown): string => {
  try {
    if (typeof value === "string") return value
    if (value instanceof Error) return value.message ? `${value.name}: ${value.message}` : value.name
    if (value === undefined) return ""
    if (typeof value === "object" && value !== null) {
      const json = JSON.stringify(toJsonSafe(value, 100_000))
      return json === undefined ? String(value) : json
    }
    return String(value)
  } catch {
    return "[unprintable]"
  }
}

class Budget {
  constructor(public left: number) {}
  spend(n: number) {
    this.left -= n
  }
  get exhausted() {
    return this.left <= 0
  }
}

const describeBinary = (value: ArrayBuffer | ArrayBufferView): string =>
  `[${value.constructor?.name ?? "binary"} ${value.byteLength} bytes]`

const walk = (value: unknown, depth: number, path: Set<object>, budget: Budget): unknown => {
  switch (typeof value) {
    case "string": {
      if (budget.exhausted) return TRUNCATED
      const room = Math.max(0, budget.left)
      budget.spend(value.length + 2)
      return value.length > room ? cleanText(value, room) + "…" + TRUNCATED : cleanText(value)
    }
    case "number":
      budget.spend(8)
      return Number.isFinite(value) ? value : null
    case "boolean":
      budget.spend(5)
      return value
    case "bigint":
      budget.spend(20)
      return value.toString()
    case "undefined":
    case "function":
    case "symbol":
      return undefined
  }
  if (value === null) {
    budget.spend(4)
    return null
  }
  const object = value as object
  if (path.has(object)) return "[circular]"
  if (depth >= MAX_DEPTH) return "[nested too deep]"
  if (budget.exhausted) return TRUNCATED
  path.add(object)
  try {
    return walkObject(object, depth, path, budget)
  } catch {
    return "[unserializable]"
  } finally {
    path.delete(object)
  }
}

const walkObject = (object: object, depth: number, path: Set<object>, budget: Budget): unknown => {
  if (object instanceof ArrayBuffer || ArrayBuffer.isView(object)) {
    budget.spend(32)
    return describeBinary(object as ArrayBuffer | ArrayBufferView)
  }
  const toJSON = (object as { toJSON?: unknown }).toJSON
  if (typeof toJSON === "function") {
    const replaced: unknown = toJSON.call(object)
    if (replaced === object) return walkPlain(object, depth, path, budget)
    return walk(replaced, depth, path, budget)
  }
  if (object instanceof Error) {
    const out: Record<string, unknown> = { name: cleanText(object.name), message: cleanText(object.message) }
    if (typeof object.stack === "string") out.stack = cleanText(object.stack, 10_000)
    budget.spend(32 + (out.message as string).length + ((out.stack as string | undefined)?.length ?? 0))
    for (const key of Object.keys(object)) {
      if (budget.exhausted) break
      const item = walk((object as unknown as Record<string, unknown>)[key], depth + 1, path, budget)
      if (item !== undefined) setKey(out, cleanText(key), item)
    }
    return out
  }
  if (object instanceof Map) {
    const out: Record<string, unknown> = {}
    for (const [key, item] of object) {
      if (budget.exhausted) {
        setKey(out, "…", TRUNCATED)
        break
      }
      const clean = walk(item, depth + 1, path, budget)
      const name = typeof key === "string" ? cleanText(key) : textOf(key)
      budget.spend(name.length + 3)
      if (clean !== undefined) setKey(out, name, clean)
    }
    return out
  }
  if (object instanceof Set) return walkArray(Array.from(object), depth, path, budget)
  if (Array.isArray(object)) return walkArray(object, depth, path, budget)
  return walkPlain(object, depth, path, budget)
}

const walkArray = (items: ReadonlyArray<unknown>, depth: number, path: Set<object>, budget: Budget): unknown[] => {
  const out: unknown[] = []
  budget.spend(2)
  for (let i = 0; i < items.length; i++) {
    if (budget.exhausted) {
      out.push(`[… ${items.length - i} more items ${TRUNCATED}]`)
      break
    }
    let item: unknown
    try {
      item = walk(items[i], depth + 1, path, budget)
    } catch {
      item = "[unserializable]"
    }
    out.push(item === undefined ? null : item)
    budget.spend(1)
  }
  return out
}

const walkPlain = (object: object, depth: number, path: Set<object>, budget: Budget): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  budget.spend(2)
  for (const key of Object.keys(object)) {
    if (budget.exhausted) {
      setKey(out, "…", TRUNCATED)
      break
    }
    let item: unknown
    try {
      item = walk((object as Record<string, unknown>)[key], depth + 1, path, budget)
    } catch {
      item = "[unserializable]"
    }
    if (item === undefined) continue
    const name = cleanText(key)
    budget.spend(name.length + 4)
    setKey(out, name, item)
  }
  return out
}

/** Plain data property, even for a key named "__proto__". */
const setKey = (target: Record<string, unknown>, key: string, value: unknown) => {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

/**
 * A JSON-safe copy of `value` of roughly at most `maxChars` characters once serialized (undefined stays
 * undefined: the field is then left out).
 */
export const toJsonSafe = (value: unknown, maxChars: number): unknown => {
  try {
    return walk(value, 0, new Set(), new Budget(maxChars))
  } catch {
    return "[unserializable]"
  }
}

/** A JSON-safe object (a non-object value is kept under `value`). */
export const toJsonObject = (value: unknown, maxChars: number): Record<string, unknown> | undefined => {
  if (value === undefined || value === null) return undefined
  const safe = toJsonSafe(value, maxChars)
  if (safe !== null && typeof safe === "object" && !Array.isArray(safe)) return safe as Record<string, unknown>
  return { value: safe }
}

/** A non-negative integer count of at most 10^12 (the service's per-span limit), or undefined. */
export const toCount = (value: unknown): number | undefined => {
  const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) return undefined
  return Math.min(Math.round(n), 1e12)
}

/** A non-negative finite amount of at most 10^15, or undefined. */
export const toAmount = (value: unknown): number | undefined => {
  const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) return undefined
  return Math.min(n, 1e15)
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const isUuid = (value: unknown): value is string => typeof value === "string" && UUID.test(value)

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")

/** A random (version 4) UUID: Web Crypto when present (Node 19+, Bun), else Math.random (Node 18). */
export const randomUuid = (): string => {
  const webCrypto = (
    globalThis as { crypto?: { randomUUID?: () => string; getRandomValues?: (a: Uint8Array) => Uint8Array } }
  ).crypto
  if (typeof webCrypto?.randomUUID === "function") return webCrypto.randomUUID()
  const bytes = new Uint8Array(16)
  if (typeof webCrypto?.getRandomValues === "function") webCrypto.getRandomValues(bytes)
  else for (let i = 0; i < 16; i++) bytes[i] = Math.floor(Math.random() * 256)
  bytes[6] = (bytes[6]! & 0x0f) | 0x40
  bytes[8] = (bytes[8]! & 0x3f) | 0x80
  const h = hex(bytes)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

/** ISO 8601 UTC with milliseconds, from epoch milliseconds. */
export const isoOf = (ms: number): string => new Date(ms).toISOString()
