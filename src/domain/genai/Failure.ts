import type { OtlpEvent, OtlpSpan } from "#src/domain/Otlp"
import { type Attrs, asText, isBlank, str } from "./Attributes.ts"
import { MAX_ERROR_CHARS, MAX_META_LONG_TEXT, MAX_STACKTRACE_CHARS } from "./Limits.ts"
import { type Json, fitText, metaText, put } from "./TextCleaning.ts"

/** "Errors" (docs/otel-mapping.md): whether a span failed, its error string and its exception. */

/** "Errors": the failure verdict and the error string. */
export type Failure = ReturnType<typeof failureOf>

export const failureOf = (span: OtlpSpan, a: Attrs) => {
  const failed =
    span.status?.code === 2 || !isBlank(a["error.type"]) || str(a, "langfuse.observation.level") === "ERROR"
  if (!failed) return { failed, error: undefined, exception: undefined as OtlpEvent | undefined }
  let exception: OtlpEvent | undefined
  for (const e of span.events) if (e.name === "exception") exception = e
  const ea = exception?.attributes
  const type = (ea !== undefined ? asText(ea["exception.type"]) : undefined) ?? asText(a["error.type"])
  const message =
    (ea !== undefined ? asText(ea["exception.message"]) : undefined) ??
    (span.status?.message || undefined) ??
    asText(a["langfuse.observation.status_message"])
  const text = type !== undefined && message !== undefined ? `${type}: ${message}` : (type ?? message ?? "error")
  return { failed, error: fitText(text, MAX_ERROR_CHARS), exception }
}

/** `metadata.exception`: the last `exception` event's attributes. */
export const exceptionMetadata = (exception: OtlpEvent): Json => {
  const ea = exception.attributes
  const out: Json = {}
  put(out, "type", metaText(asText(ea["exception.type"])))
  put(out, "message", metaText(asText(ea["exception.message"]), MAX_META_LONG_TEXT))
  put(out, "stacktrace", metaText(asText(ea["exception.stacktrace"]), MAX_STACKTRACE_CHARS))
  if (typeof ea["exception.escaped"] === "boolean") out.escaped = ea["exception.escaped"]
  return out
}
