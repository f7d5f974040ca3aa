import { MAX_AMOUNT, MAX_SPAN_COUNT } from "#src/domain/Json"

/**
 * Reading OTLP attributes: the first non-blank of several keys, counts and amounts, JSON-documented strings, and
 * the flattened indexed families (`llm.input_messages.{i}.*`, `gen_ai.prompt.{i}.*`).
 */

export type Attrs = Readonly<Record<string, unknown>>

export const isBlank = (v: unknown): boolean => {
  if (v === undefined || v === null || v === "") return true
  if (typeof v !== "object") return false
  if (Array.isArray(v)) return v.length === 0
  for (const _ in v) return false
  return true
}

export const first = (a: Attrs, keys: ReadonlyArray<string>): unknown => {
  for (const key of keys) {
    const v = a[key]
    if (!isBlank(v)) return v
  }
  return undefined
}

/** A non-empty string attribute. */
export const str = (a: Attrs, key: string): string | undefined => {
  const v = a[key]
  return typeof v === "string" && v !== "" ? v : undefined
}

/** Strings, and numbers or booleans written as strings (ids are sometimes sent as integers). */
export const asText = (v: unknown): string | undefined => {
  if (typeof v === "string") return v === "" ? undefined : v
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : undefined
  if (typeof v === "boolean") return String(v)
  return undefined
}

export const firstText = (a: Attrs, keys: ReadonlyArray<string>): string | undefined => {
  for (const key of keys) {
    const t = asText(a[key])
    if (t !== undefined) return t
  }
  return undefined
}

export const firstString = (a: Attrs, keys: ReadonlyArray<string>): string | undefined => {
  for (const key of keys) {
    const t = str(a, key)
    if (t !== undefined) return t
  }
  return undefined
}

/** A token count: an integer 0..1e12 from a number or a numeric string; anything else is absent. `+ 0` makes -0 a 0. */
export const asCount = (v: unknown): number | undefined => {
  let n: number
  if (typeof v === "number") n = v
  else if (typeof v === "string" && v.trim() !== "") n = Number(v)
  else return undefined
  if (!Number.isFinite(n) || n < 0) return undefined
  return Math.min(Math.round(n), MAX_SPAN_COUNT) + 0
}

export const firstCount = (a: Attrs, keys: ReadonlyArray<string>): number | undefined => {
  for (const key of keys) {
    const n = asCount(a[key])
    if (n !== undefined) return n
  }
  return undefined
}

/** A cost: a finite number ≥ 0 (capped at the column's maximum). */
export const asAmount = (v: unknown): number | undefined => {
  let n: number
  if (typeof v === "number") n = v
  else if (typeof v === "string" && v.trim() !== "") n = Number(v)
  else return undefined
  if (!Number.isFinite(n) || n < 0) return undefined
  return Math.min(n, MAX_AMOUNT) + 0
}

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09

/**
 * A JSON-documented attribute: a string that starts like a JSON object, array or string is parsed; a parse
 * failure (often an SDK length limit cutting the string) keeps the raw string.
 */
export const parseJsonish = (v: unknown): unknown => {
  if (typeof v !== "string") return v
  let i = 0
  while (i < v.length && isSpace(v.charCodeAt(i))) i++
  const c = v.charCodeAt(i)
  if (c !== 0x7b && c !== 0x5b && c !== 0x22) return v
  try {
    return JSON.parse(v)
  } catch {
    return v
  }
}

/** Objects and arrays parsed, for attributes that are only ever JSON objects or arrays. */
export const parseStructured = (v: unknown): unknown => {
  if (typeof v !== "string") return v
  let i = 0
  while (i < v.length && isSpace(v.charCodeAt(i))) i++
  const c = v.charCodeAt(i)
  if (c !== 0x7b && c !== 0x5b) return v
  try {
    return JSON.parse(v)
  } catch {
    return v
  }
}

export const parseJsonAlways = (v: unknown): unknown => {
  if (typeof v !== "string") return v
  try {
    return JSON.parse(v)
  } catch {
    return v
  }
}

export const firstParsed = (a: Attrs, keys: ReadonlyArray<string>): unknown => {
  for (const key of keys) {
    const v = a[key]
    if (!isBlank(v)) return parseJsonish(v)
  }
  return undefined
}

export interface Scan {
  llmInputMessages: boolean
  llmOutputMessages: boolean
  llmPrompts: boolean
  llmChoices: boolean
  genAiPromptIndexed: boolean
  genAiCompletionIndexed: boolean
  aggregatedUsage: boolean
}

export const isDigit = (c: number) => c >= 0x30 && c <= 0x39

/** Which indexed family a key belongs to (0 = none); indexed keys never go to `metadata.attributes`. */
export const indexedFamily = (key: string): number => {
  if (key.startsWith("llm.")) {
    if (key.startsWith("llm.input_messages.")) return 1
    if (key.startsWith("llm.output_messages.")) return 2
    if (key.startsWith("llm.prompts.")) return 3
    if (key.startsWith("llm.choices.")) return 4
    return 0
  }
  if (key.startsWith("gen_ai.")) {
    if (key.startsWith("gen_ai.prompt.") && isDigit(key.charCodeAt(14))) return 5
    if (key.startsWith("gen_ai.completion.") && isDigit(key.charCodeAt(18))) return 6
    if (key.startsWith("gen_ai.aggregated_usage.")) return 7
  }
  return 0
}

export const scanKeys = (a: Attrs): Scan => {
  const s: Scan = {
    llmInputMessages: false,
    llmOutputMessages: false,
    llmPrompts: false,
    llmChoices: false,
    genAiPromptIndexed: false,
    genAiCompletionIndexed: false,
    aggregatedUsage: false
  }
  for (const key in a) {
    switch (indexedFamily(key)) {
      case 1:
        s.llmInputMessages = true
        break
      case 2:
        s.llmOutputMessages = true
        break
      case 3:
        s.llmPrompts = true
        break
      case 4:
        s.llmChoices = true
        break
      case 5:
        s.genAiPromptIndexed = true
        break
      case 6:
        s.genAiCompletionIndexed = true
        break
      case 7:
        if (!isBlank(a[key])) s.aggregatedUsage = true
        break
    }
  }
  return s
}

/**
 * Flattened keys `{prefix}{i}.{rest}` grouped by index, in index order: one Map of `rest` → value per index.
 */
export const indexed = (a: Attrs | ReadonlyMap<string, unknown>, prefix: string): Array<Map<string, unknown>> => {
  const groups = new Map<number, Map<string, unknown>>()
  const add = (key: string, value: unknown) => {
    if (!key.startsWith(prefix)) return
    let i = prefix.length
    while (i < key.length && isDigit(key.charCodeAt(i))) i++
    if (i === prefix.length || i - prefix.length > 9 || key.charCodeAt(i) !== 0x2e) return
    const index = Number(key.slice(prefix.length, i))
    let group = groups.get(index)
    if (group === undefined) groups.set(index, (group = new Map()))
    group.set(key.slice(i + 1), value)
  }
  if (a instanceof Map) for (const [key, value] of a) add(key, value)
  else for (const key in a) add(key, (a as Attrs)[key])
  return [...groups.entries()].sort((x, y) => x[0] - y[0]).map((e) => e[1])
}

export const mapStr = (m: ReadonlyMap<string, unknown>, key: string): string | undefined => asText(m.get(key))
