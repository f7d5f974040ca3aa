import type { SpanType } from "#src/domain/Span"
import { objectAttribute, parsed, set, tagsOf, textOf, type ConventionReading } from "./Reading.ts"

type Attrs = Readonly<Record<string, unknown>>

/** lmnr.span.type values that name one of our span types; DEFAULT and the evaluation types say nothing. */
const LAMINAR_TYPES: ReadonlyMap<string, SpanType> = new Map([["LLM", "llm_call"], ["TOOL", "tool_call"]])

const ASSOCIATION = "lmnr.association.properties"

/**
 * Laminar's `lmnr.*` attributes: the span type, the input and output its `observe()` wrapper records, and the
 * association properties (session, user, tags, metadata) it puts on every span of a trace.
 */
export const readLaminar = (a: Attrs, into: ConventionReading) => {
  const type = textOf(a["lmnr.span.type"])
  set(into, "type", type === undefined ? undefined : LAMINAR_TYPES.get(type.toUpperCase()))
  if (a["lmnr.span.input"] !== undefined) set(into, "input", parsed(a["lmnr.span.input"]))
  if (a["lmnr.span.output"] !== undefined) set(into, "output", parsed(a["lmnr.span.output"]))
  set(into, "sessionId", textOf(a[`${ASSOCIATION}.session_id`]))
  set(into, "userId", textOf(a[`${ASSOCIATION}.user_id`]))
  const tags = tagsOf(a[`${ASSOCIATION}.tags`])
  if (tags !== undefined) into.tags = [...(into.tags ?? []), ...tags]
  const metadata = objectAttribute(a, `${ASSOCIATION}.metadata`)
  if (metadata !== undefined) into.traceMetadata = { ...into.traceMetadata, ...metadata }
}

export const isLaminarKey = (key: string) =>
  key === "lmnr.span.type" || key === "lmnr.span.input" || key === "lmnr.span.output" || key.startsWith(ASSOCIATION)
