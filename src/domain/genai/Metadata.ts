import { isoOfMillis } from "#src/domain/Instant"
import type { OtlpEvent, OtlpSpan } from "#src/domain/Otlp"
import { CONSUMED, PROVIDER_KEYS, TOOL_CALL_ID_KEYS, TOOL_DESCRIPTION_KEYS } from "./AttributeKeys.ts"
import { type Attrs, asText, firstText, indexedFamily, isBlank, parseStructured, str } from "./Attributes.ts"
import {
  ATTRIBUTES_BUDGET,
  EVENTS_BUDGET,
  MAX_EVENTS,
  MAX_META_LONG_TEXT,
  MAX_META_TEXT,
  RESOURCE_BUDGET
} from "./Limits.ts"
import { nanos } from "./OtlpTime.ts"
import {
  type Budget,
  type Json,
  OVERFLOW,
  cleanText,
  cleanValue,
  fitText,
  metaText,
  put,
  setKey,
  small
} from "./TextCleaning.ts"
import { usageMetadata } from "./Usage.ts"
import { type ConventionReading, isConventionKey } from "./conventions/Conventions.ts"
import { isConsumedEvent } from "./messages/GenAiEvents.ts"

/** `metadata.otel`, `metadata.gen_ai` and the leftovers (`attributes`, `resource`, `events`) of a mapped span. */

const KIND_NAMES = ["UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]
const STATUS_NAMES = ["UNSET", "OK", "ERROR"]

/** Remaining attributes (or resource attributes) within a budget; `dropped` counts keys left out. */
const remainder = (
  a: Attrs,
  depth: number,
  budget: number,
  maxString: number,
  skip: boolean,
  alsoConsumed?: string
): { value: Json | undefined; dropped: number } => {
  let out: Json | undefined
  let dropped = 0
  const b: Budget = { left: budget, maxString }
  for (const key in a) {
    if (skip && (CONSUMED.has(key) || key === alsoConsumed || isConventionKey(key) || indexedFamily(key) !== 0))
      continue
    const before = b.left
    const c = cleanValue(a[key], depth, b)
    if (c === OVERFLOW) {
      b.left = before
      dropped++
      continue
    }
    if (c === undefined) continue
    b.left -= key.length + 4
    setKey((out ??= {}), key.indexOf("\u0000") === -1 && key.isWellFormed() ? key : cleanText(key), c)
  }
  return { value: out, dropped }
}

/** Events not turned into input/output or `metadata.exception`, within a budget. */
const keptEvents = (events: ReadonlyArray<OtlpEvent>, used: number, exception: OtlpEvent | undefined) => {
  const value: Array<Json> = []
  let cut = false
  const b: Budget = { left: EVENTS_BUDGET, maxString: MAX_META_LONG_TEXT }
  for (const e of events) {
    if (e === exception || isConsumedEvent(e.name, used)) continue
    if (value.length >= MAX_EVENTS) {
      cut = true
      break
    }
    const t = nanos(e.timeUnixNano)
    const name = fitText(typeof e.name === "string" ? e.name : "", MAX_META_TEXT)
    const entry: Json = { name }
    if (t !== undefined && (t.ms > 0 || t.rest > 0)) entry.time = isoOfMillis(t.ms)
    if (e.attributes !== undefined && !isBlank(e.attributes)) {
      const before = b.left
      const attrs = cleanValue(e.attributes, 3, b)
      if (attrs === OVERFLOW) {
        b.left = before
        cut = true
      } else entry.attributes = attrs
    }
    b.left -= name.length + 40
    value.push(entry)
    if (b.left < 0) {
      cut = true
      break
    }
  }
  return { value, cut }
}

/** A span's OTel ids as lowercase hex. */
export interface OtelHexIds {
  readonly trace: string
  readonly span: string
  readonly parent: string | null
}

export const otelIdsOf = (span: OtlpSpan): OtelHexIds => ({
  trace: span.traceId.toLowerCase(),
  span: span.spanId.toLowerCase(),
  parent: span.parentSpanId ? span.parentSpanId.toLowerCase() : null
})

/** `metadata.otel`: the span's OTel identity, kind, status, scope and the flags finalize reads back. */
export const otelMetadata = (
  span: OtlpSpan,
  resource: Attrs,
  hex: OtelHexIds,
  original: string | undefined,
  failed: boolean
) => {
  const otel: Json = { trace_id: hex.trace, span_id: hex.span }
  if (hex.parent !== null) otel.parent_span_id = hex.parent
  otel.kind = KIND_NAMES[span.kind] ?? "UNSPECIFIED"
  otel.status_code = STATUS_NAMES[span.status?.code ?? 0] ?? "UNSET"
  if (span.status?.message) otel.status_message = metaText(span.status.message, MAX_META_LONG_TEXT)
  if (span.scope !== undefined) {
    const scope: Json = { name: metaText(span.scope.name) ?? "", version: metaText(span.scope.version) ?? "" }
    if (span.scope.attributes !== undefined && !isBlank(span.scope.attributes)) {
      put(scope, "attributes", remainder(span.scope.attributes, 4, RESOURCE_BUDGET / 4, MAX_META_TEXT, false).value)
    }
    otel.scope = scope
  }
  put(otel, "service_name", metaText(asText(resource["service.name"])))
  if (original !== undefined) otel.span_name = original
  if (span.flags) otel.flags = span.flags
  if (span.traceState) otel.trace_state = metaText(span.traceState)
  if (span.idEncoding === "base64") otel.id_encoding = "base64"
  if (hex.parent === null) otel.root = true
  else if ((span.flags & 0x300) === 0x300) otel.local_root = true
  if (failed) otel.failed = true
  return otel
}

/** `metadata.gen_ai`: operation, provider, models, response, usage details, tool and agent as sent. */
export const genAiMetadata = (
  a: Attrs,
  operation: string | undefined,
  toolName: string | undefined,
  conv: ConventionReading
) => {
  const genAi: Json = {}
  put(genAi, "operation", metaText(operation))
  put(genAi, "provider", metaText(firstText(a, PROVIDER_KEYS)))
  put(genAi, "request_model", metaText(str(a, "gen_ai.request.model")))
  put(genAi, "response_model", metaText(str(a, "gen_ai.response.model")))
  put(genAi, "response_id", metaText(asText(a["gen_ai.response.id"])))
  if (!isBlank(a["gen_ai.response.finish_reasons"])) {
    genAi.finish_reasons = small(parseStructured(a["gen_ai.response.finish_reasons"]))
  }
  put(genAi, "conversation_id", metaText(asText(a["gen_ai.conversation.id"])))
  const usage = usageMetadata(a, conv)
  if (!isBlank(usage)) genAi.usage = usage
  const tool: Json = {}
  put(tool, "name", metaText(toolName))
  put(tool, "call_id", metaText(firstText(a, TOOL_CALL_ID_KEYS)))
  put(tool, "type", metaText(asText(a["gen_ai.tool.type"])))
  put(tool, "description", metaText(firstText(a, TOOL_DESCRIPTION_KEYS), MAX_META_LONG_TEXT))
  if (!isBlank(tool)) genAi.tool = tool
  const agent: Json = {}
  put(agent, "id", metaText(asText(a["gen_ai.agent.id"])))
  put(agent, "name", metaText(asText(a["gen_ai.agent.name"])))
  put(agent, "description", metaText(asText(a["gen_ai.agent.description"]), MAX_META_LONG_TEXT))
  put(agent, "version", metaText(asText(a["gen_ai.agent.version"])))
  if (!isBlank(agent)) genAi.agent = agent
  return genAi
}

/** `attributes`, `resource` and `events`: what no field took, within their budgets; cuts go into `truncated`. */
export const putLeftovers = (
  meta: Json,
  a: Attrs,
  resource: Attrs,
  events: ReadonlyArray<OtlpEvent>,
  usedEvents: number,
  exception: OtlpEvent | undefined,
  truncated: Array<string>,
  alsoConsumed?: string
) => {
  const rest = remainder(a, 2, ATTRIBUTES_BUDGET, MAX_META_LONG_TEXT * 2, true, alsoConsumed)
  if (rest.value !== undefined) meta.attributes = rest.value
  if (rest.dropped > 0) truncated.push("attributes")
  if (!isBlank(resource)) {
    const res = remainder(resource, 2, RESOURCE_BUDGET, MAX_META_TEXT * 2, false)
    if (res.value !== undefined) meta.resource = res.value
    if (res.dropped > 0) truncated.push("resource")
  }
  if (events.length > 0) {
    const kept = keptEvents(events, usedEvents, exception)
    if (kept.value.length > 0) meta.events = kept.value
    if (kept.cut) truncated.push("events")
  }
}
