import type { SpanType } from "#src/domain/Span"

type Attrs = Readonly<Record<string, unknown>>

/**
 * What a vendor SDK's own attributes (Langfuse, Laminar, OpenInference) say about a span beyond the GenAI
 * conventions the mapping reads. Every field is optional: a reader fills what its SDK sent.
 */
export interface ConventionReading {
  /** A span type the SDK states outright (Laminar's lmnr.span.type). */
  type?: SpanType
  input?: unknown
  output?: unknown
  sessionId?: string
  userId?: string
  tags?: Array<string>
  /** Onto the trace's `metadata.metadata` (filterable as trace metadata). */
  traceMetadata?: Record<string, unknown>
  /** Trace-level facts kept in the trace's metadata: environment name, release, version. */
  environment?: string
  release?: string
  version?: string
  /** `metadata.<vendor>` of the span: observation metadata, model parameters, prompt, completion start. */
  spanDetails?: Record<string, unknown>
  /** Cached (cache-read) input tokens reported in a usage breakdown. */
  cachedInputTokens?: number
  /** openinference.project.name: the trace's project, by name. */
  projectName?: string
}

export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

export const textOf = (v: unknown): string | undefined => {
  if (typeof v === "string") return v.trim() === "" ? undefined : v
  if (typeof v === "number" || typeof v === "boolean") return String(v)
  return undefined
}

/** A JSON string as its value (objects, arrays, strings); anything else as it is. */
export const parsed = (v: unknown): unknown => {
  if (typeof v !== "string") return v
  const t = v.trimStart()
  if (t.startsWith("{") || t.startsWith("[") || t.startsWith("\"")) {
    try {
      return JSON.parse(v)
    } catch {
      return v
    }
  }
  return v
}

/** A non-negative integer count from a number or a decimal string. */
export const countOf = (v: unknown): number | undefined => {
  const n = typeof v === "string" && /^\d{1,15}$/.test(v) ? Number(v) : v
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 0 ? n : undefined
}

/** A list of tag strings from an array or a JSON array string. */
export const tagsOf = (v: unknown): Array<string> | undefined => {
  const list = parsed(v)
  if (!Array.isArray(list)) return typeof list === "string" && list.trim() !== "" ? [list] : undefined
  const tags = list.map(textOf).filter((t): t is string => t !== undefined)
  return tags.length > 0 ? tags : undefined
}

/**
 * An object attribute sent either whole (`prefix` as a JSON object string) or flattened (`prefix.key` per
 * entry, as the Langfuse and Laminar SDKs flatten metadata). Flattened entries win over the whole object's.
 */
export const objectAttribute = (a: Attrs, prefix: string): Record<string, unknown> | undefined => {
  let out: Record<string, unknown> | undefined
  const whole = parsed(a[prefix])
  if (isRecord(whole)) out = { ...whole }
  const dotted = prefix + "."
  for (const key in a) {
    if (!key.startsWith(dotted) || key.length === dotted.length) continue
    ;(out ??= {})[key.slice(dotted.length)] = parsed(a[key])
  }
  return out
}

/** Sets `key` when `value` is defined; keeps readings free of undefined fields. */
export const set = <K extends keyof ConventionReading>(r: ConventionReading, key: K, value: ConventionReading[K] | undefined) => {
  if (value !== undefined) r[key] = value
}
