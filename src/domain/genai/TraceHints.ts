import { SPAN_TEXT_LIMITS } from "#src/domain/Span"
import { ENVIRONMENT_KEYS, SESSION_KEYS, TAG_KEYS, TRACE_NAME_KEYS } from "./AttributeKeys.ts"
import { type Attrs, asText, firstText, isBlank, parseJsonish, parseStructured } from "./Attributes.ts"
import { CONVENTION_BUDGET, MAX_HINT_IO_CHARS, MAX_META_LONG_TEXT, MAX_TAGS, MAX_TAG_CHARS } from "./Limits.ts"
import type { SpanIds } from "./SpanIds.ts"
import { type Json, fitText, fitValue, metaText, put } from "./TextCleaning.ts"
import type { ConventionReading } from "./conventions/Conventions.ts"

/** What one span says about its trace (`metadata.trace_hints`), applied by the per-trace finalize pass. */

/** A list of tags from an array, a JSON array string, or a comma-separated string (LangSmith). */
const tagsOf = (v: unknown, into: Array<string>) => {
  const parsed = parseStructured(v)
  const list = Array.isArray(parsed) ? parsed : typeof parsed === "string" ? parsed.split(",") : []
  for (const item of list) {
    const t = asText(item)?.trim()
    if (t === undefined || t === "" || into.length >= MAX_TAGS) continue
    const tag = fitText(t, MAX_TAG_CHARS)
    if (!into.includes(tag)) into.push(tag)
  }
}

/** `metadata.trace_hints`: what a span says about its whole trace, for finalize to apply; cuts go into `truncated`. */
export const traceHints = (
  ids: SpanIds,
  a: Attrs,
  resource: Attrs,
  conv: ConventionReading,
  truncated: Array<string>
) => {
  const hints: Json = {}
  put(hints, "name", metaText(firstText(a, TRACE_NAME_KEYS), SPAN_TEXT_LIMITS.name))
  if (!isBlank(a["langfuse.trace.input"])) {
    const fit = fitValue(parseJsonish(a["langfuse.trace.input"]), 2, MAX_HINT_IO_CHARS)
    hints.input = fit.value
    if (fit.cut) truncated.push("trace_hints.input")
  }
  if (!isBlank(a["langfuse.trace.output"])) {
    const fit = fitValue(parseJsonish(a["langfuse.trace.output"]), 2, MAX_HINT_IO_CHARS)
    hints.output = fit.value
    if (fit.cut) truncated.push("trace_hints.output")
  }
  const tags: Array<string> = []
  for (const key of TAG_KEYS) if (!isBlank(a[key])) tagsOf(a[key], tags)
  if (conv.tags !== undefined) tagsOf(conv.tags, tags)
  if (tags.length > 0) hints.tags = tags
  put(hints, "resource_session_id", metaText(firstText(resource, SESSION_KEYS)))
  put(hints, "environment", metaText(firstText(a, ENVIRONMENT_KEYS) ?? firstText(resource, ENVIRONMENT_KEYS)))
  if (conv.traceMetadata !== undefined) {
    const fit = fitValue(conv.traceMetadata, 2, CONVENTION_BUDGET, MAX_META_LONG_TEXT)
    hints.metadata = fit.value
    if (fit.cut) truncated.push("trace_hints.metadata")
  }
  // The Langfuse Python SDK (v3) puts the release (and environment) on the resource, the JS SDK on every span.
  put(hints, "release", metaText(conv.release ?? firstText(resource, ["langfuse.release"])))
  put(hints, "version", metaText(conv.version))
  if (conv.projectName !== undefined) hints.project_id = ids.project(conv.projectName)
  return hints
}
