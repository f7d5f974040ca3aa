import { isoOfMillis } from "#src/domain/Instant"
import { MAX_SPAN_COUNT } from "#src/domain/Json"
import type { OtlpSpan } from "#src/domain/Otlp"
import { SPAN_TEXT_LIMITS, type SpanType } from "#src/domain/Span"
import { type OwnAgent, agentMetadata, ownAgentOf } from "./Agents.ts"
import { MODEL_KEYS, SESSION_KEYS, USER_KEYS } from "./AttributeKeys.ts"
import { type Attrs, firstString, firstText, isBlank, parseStructured, scanKeys, str } from "./Attributes.ts"
import { type Failure, exceptionMetadata, failureOf } from "./Failure.ts"
import { type IoState, inputOutputOf } from "./InputOutput.ts"
import { CONVENTION_BUDGET, MAX_IO_CHARS, MAX_META_LONG_TEXT } from "./Limits.ts"
import { type OtelHexIds, genAiMetadata, otelIdsOf, otelMetadata, putLeftovers } from "./Metadata.ts"
import { nanos } from "./OtlpTime.ts"
import type { SpanIds } from "./SpanIds.ts"
import { type Facts, type Source, aiOperation, nameOf, spanTypeOf, toolNameOf } from "./SpanKinds.ts"
import { type Json, fitText, fitValue, metaText, put, small } from "./TextCleaning.ts"
import { traceHints } from "./TraceHints.ts"
import { type SpanUsage, putAggregateUsage, usageOf } from "./Usage.ts"
import { type ConventionReading, readConventions } from "./conventions/Conventions.ts"
import { isMastraModelStep } from "./conventions/Mastra.ts"
import { toolDefinitionsInInput } from "./conventions/RequestParameters.ts"
import { isFrameworkPlumbing } from "./conventions/Plumbing.ts"
import type { ExportMemo } from "./Reuse.ts"

/**
 * The GenAI mapping of one OTLP span to our span (docs/otel-mapping.md). Pure and total:
 * every value it returns can be stored as PostgreSQL jsonb/text and is within the span limits.
 *
 * Besides the layout of docs/otel-mapping.md ("Span metadata"), `metadata` persists what the per-trace finalize
 * pass (TraceFinalize.ts) reads back from storage, since it has nothing else:
 * - `otel.root: true`        the span has no parent (a true root)
 * - `otel.local_root: true`  flags bits 8 and 9 say the parent is remote (the fallback root)
 * - `otel.failed: true`      the span failed (see "Errors"; the trace fails when its root did)
 * - `otel.service_name`      `service.name` of the span's resource
 * - `agent`                  `{ is_agent_span, own_id?, own_role? }`: own agent identity, kept apart from the
 *                            `agent_id`/`agent_role` columns, which finalize overwrites with inherited values
 * - `aggregate_usage`        usage repeated from children, promoted by finalize when no child has any
 * - `session_id`, `user_id`  first session / user id key on the span's attributes
 * - `trace_hints`            `{ name?, input?, output?, tags?, resource_session_id?, environment? }`:
 *                            `langfuse.trace.name` / `traceloop.workflow.name` / `gen_ai.workflow.name` /
 *                            `ai.telemetry.functionId`,
 *                            `langfuse.trace.input` / `output`, the trace tags, the session id found on the
 *                            resource, and the raw deployment environment (`sandbox` marks a sandbox trace);
 *                            from the vendor conventions (conventions/): `metadata`, `release`, `version`, `project_id`
 * Flags are written only when true. As that page says, `attributes` holds the attributes not mapped elsewhere and
 * `resource` the resource attributes (both size-capped), `events` the events not turned into input, output
 * or `exception`, and `truncated` names what was cut. `mapping_error` marks the bare fallback span.
 */
export interface MappedSpan {
  /** The span as stored: the API's Span field names (snake_case), ISO 8601 UTC strings with milliseconds for times. */
  readonly span: {
    id: string
    parent_id: string | null
    span_type: SpanType
    name: string
    model?: string
    input?: unknown
    output?: unknown
    input_tokens?: number
    output_tokens?: number
    cost?: number
    duration_ms?: number
    metadata: Record<string, unknown>
    agent_id?: string
    parent_agent_id?: string
    agent_role?: string
    started_at: string
    ended_at?: string
    error?: string
  }
  /** Our trace UUID (docs/otel-mapping.md, "Ids"). */
  readonly traceId: string
  /** The OTel trace id, lowercase hex. */
  readonly otelTraceId: string
}

/**
 * Maps one decoded OTLP span to our span, or `undefined` for a span that is deliberately skipped (a Logfire
 * `pending_span` placeholder duplicating a real span). Never throws: a span the mapper cannot make sense of
 * is still stored, as a bare `action` with `metadata.mapping_error`. With a memo, what the export's earlier spans
 * mapped is reused (Reuse.ts).
 */
export const mapSpan = (ids: SpanIds, span: OtlpSpan, memo?: ExportMemo): MappedSpan | undefined => {
  const a: Attrs = span.attributes ?? {}
  if (a["logfire.span_type"] === "pending_span") return undefined
  try {
    return mapChecked(ids, span, a, memo)
  } catch (error) {
    return fallback(ids, span, error)
  }
}

const mapChecked = (ids: SpanIds, span: OtlpSpan, a: Attrs, memo: ExportMemo | undefined): MappedSpan => {
  const r = readSpan(span, a, memo)
  const truncated: Array<string> = []
  const out = columnsOf(ids, r, truncated)
  // A model call's tool definitions stored whole in its input are not repeated among the leftover attributes.
  const toolsInInput =
    r.type === "llm_call" &&
    !truncated.includes("input") &&
    toolDefinitionsInInput(a["gen_ai.tool.definitions"], out.input, memo)
  putMetadata(out.metadata, ids, r, truncated, toolsInInput ? "gen_ai.tool.definitions" : undefined)
  if (truncated.length > 0) out.metadata.truncated = truncated
  return { span: out, traceId: ids.trace(r.hex.trace), otelTraceId: r.hex.trace }
}

/** Everything read from one span before anything is written. */
interface SpanReading {
  readonly span: OtlpSpan
  readonly a: Attrs
  readonly resource: Attrs
  readonly hex: OtelHexIds
  readonly failure: Failure
  readonly conv: ConventionReading
  readonly f: Facts
  readonly type: SpanType
  readonly source: Source
  readonly usage: SpanUsage
  readonly input: unknown
  readonly output: unknown
  /** The `EVENT_*` families turned into input or output, so not repeated in `metadata.events`. */
  readonly usedEvents: number
  readonly agent: OwnAgent
  readonly toolName: string | undefined
  readonly modelRaw: string | undefined
  readonly name: string
  /** The name as sent, when the mapping renamed the span. */
  readonly originalName: string | undefined
}

const readSpan = (span: OtlpSpan, a: Attrs, memo: ExportMemo | undefined): SpanReading => {
  const resource: Attrs = span.resource ?? {}
  const failure = failureOf(span, a)
  // Vendor SDK and framework attributes (Langfuse, Laminar, OpenInference, Mastra, LangGraph) beyond the conventions read here.
  const conv = readConventions(a, resource)
  const f = readFacts(span, a, failure.failed, memo)
  const { type, source } = spanTypeOf(f, conv.type)
  const io: IoState = { usedEvents: 0 }
  const { input, output } = inputOutputOf(f, type, conv, io)
  const toolName = toolNameOf(f)
  const modelRaw = firstString(a, MODEL_KEYS)
  const { name, original } = nameOf(span, type, f.operation ?? f.aiOp, modelRaw, toolName)
  return {
    span,
    a,
    resource,
    hex: otelIdsOf(span),
    failure,
    conv,
    f,
    type,
    source,
    usage: usageOf(f, type),
    input,
    output,
    usedEvents: io.usedEvents,
    agent: ownAgentOf(f, span.name),
    toolName,
    modelRaw,
    name,
    originalName: original
  }
}

/** The span's columns, in the order they are stored; `metadata` is filled by `putMetadata`. */
const columnsOf = (ids: SpanIds, r: SpanReading, truncated: Array<string>): MappedSpan["span"] => {
  const { span, hex, agent } = r
  const start = nanos(span.startTimeUnixNano) ?? { ms: 0, rest: 0 }
  const out: MappedSpan["span"] = {
    id: ids.span(hex.trace, hex.span),
    parent_id: hex.parent === null ? null : ids.parent(hex.trace, hex.parent),
    span_type: r.type,
    name: r.name,
    metadata: {},
    started_at: isoOfMillis(start.ms)
  }
  const model = metaText(r.modelRaw, SPAN_TEXT_LIMITS.model)
  if (model !== undefined) out.model = model
  putInputOutput(out, r.input, r.output, truncated)
  if (!r.usage.aggregate) putOwnUsage(out, r.usage)
  const end = nanos(span.endTimeUnixNano)
  const hasEnd = end !== undefined && (end.ms > 0 || end.rest > 0)
  if (hasEnd) {
    const durationNs = (end.ms - start.ms) * 1e6 + (end.rest - start.rest)
    out.duration_ms = Math.min(Math.max(Math.round(durationNs / 1e6), 0), MAX_SPAN_COUNT)
  }
  // The span's own agent identity; inherited values are resolved by finalize.
  if (agent.ownId !== undefined) out.agent_id = agent.ownId
  if (agent.ownRole !== undefined && agent.ownId !== undefined) out.agent_role = agent.ownRole
  if (hasEnd) out.ended_at = isoOfMillis(end.ms)
  if (r.failure.error !== undefined) out.error = r.failure.error
  return out
}

/** `metadata` (docs/otel-mapping.md, "Span metadata"), in the order it is stored. */
const putMetadata = (
  meta: Json,
  ids: SpanIds,
  r: SpanReading,
  truncated: Array<string>,
  alsoConsumed: string | undefined
) => {
  const { a, conv, agent, failure } = r
  meta.source = r.source
  if (isFrameworkPlumbing(r.span.name, a, r.type !== "action" || agent.agentSpan)) meta.framework_plumbing = true
  // Finalize lends such a step's messages and tool calls to the model call inside it.
  if (isMastraModelStep(a)) meta.model_step = true
  meta.otel = otelMetadata(r.span, r.resource, r.hex, r.originalName, failure.failed)
  const genAi = genAiMetadata(a, r.f.operation, r.toolName, conv)
  // A model call's instructions are its input's system message; an agent's are kept here.
  if (r.type !== "llm_call" && !isBlank(a["gen_ai.system_instructions"])) {
    genAi.system_instructions = small(parseStructured(a["gen_ai.system_instructions"]))
  }
  if (!isBlank(genAi)) meta.gen_ai = genAi
  if (agent.agentSpan || agent.ownId !== undefined) meta.agent = agentMetadata(agent)
  if (r.usage.aggregate) putAggregateUsage(meta, a, r.usage)
  put(meta, "session_id", metaText(firstText(a, SESSION_KEYS) ?? conv.sessionId))
  put(meta, "user_id", metaText(firstText(a, USER_KEYS) ?? conv.userId))
  for (const vendor in conv.spanDetails) {
    const fit = fitValue(conv.spanDetails[vendor], 1, CONVENTION_BUDGET, MAX_META_LONG_TEXT)
    meta[vendor] = fit.value
    if (fit.cut) truncated.push(vendor)
  }
  if (failure.exception !== undefined) meta.exception = exceptionMetadata(failure.exception)
  const hints = traceHints(ids, a, r.resource, conv, truncated)
  if (!isBlank(hints)) meta.trace_hints = hints
  putLeftovers(meta, a, r.resource, r.f.events, r.usedEvents, failure.exception, truncated, alsoConsumed)
}

/** What the span says about itself, read once: the facts the type decision and the readers share. */
const readFacts = (span: OtlpSpan, a: Attrs, failed: boolean, memo: ExportMemo | undefined): Facts => {
  const oi = str(a, "openinference.span.kind")
  return {
    a,
    events: span.events ?? [],
    scan: scanKeys(a),
    operation: str(a, "gen_ai.operation.name"),
    aiOp: aiOperation(a),
    oiKind: oi?.toUpperCase(),
    traceloopKind: str(a, "traceloop.span.kind"),
    langfuseType: str(a, "langfuse.observation.type"),
    langsmithKind: str(a, "langsmith.span.kind"),
    failed,
    memo
  }
}

const putInputOutput = (out: MappedSpan["span"], input: unknown, output: unknown, truncated: Array<string>) => {
  if (input !== undefined) {
    const fit = fitValue(input, 0, MAX_IO_CHARS)
    out.input = fit.value
    if (fit.cut) truncated.push("input")
  }
  if (output !== undefined) {
    const fit = fitValue(output, 0, MAX_IO_CHARS)
    out.output = fit.value
    if (fit.cut) truncated.push("output")
  }
}

const putOwnUsage = (out: MappedSpan["span"], usage: SpanUsage) => {
  if (usage.inputTokens !== undefined) out.input_tokens = usage.inputTokens
  if (usage.outputTokens !== undefined) out.output_tokens = usage.outputTokens
  if (usage.cost !== undefined) out.cost = usage.cost
}

const fallback = (ids: SpanIds, span: OtlpSpan, error: unknown): MappedSpan => {
  const traceHex = String(span.traceId).toLowerCase()
  const spanHex = String(span.spanId).toLowerCase()
  const parentHex = span.parentSpanId ? String(span.parentSpanId).toLowerCase() : null
  const start = nanos(span.startTimeUnixNano) ?? { ms: 0, rest: 0 }
  const otel: Json = { trace_id: traceHex, span_id: spanHex }
  if (parentHex !== null) otel.parent_span_id = parentHex
  if (parentHex === null) otel.root = true
  else if ((Number(span.flags) & 0x300) === 0x300) otel.local_root = true
  if (span.status?.code === 2) otel.failed = true
  const trimmed = typeof span.name === "string" ? span.name.trim() : ""
  const name = trimmed !== "" ? fitText(trimmed, SPAN_TEXT_LIMITS.name) : "span"
  return {
    span: {
      id: ids.span(traceHex, spanHex),
      parent_id: parentHex === null ? null : ids.parent(traceHex, parentHex),
      span_type: span.status?.code === 2 ? "error" : "action",
      name,
      metadata: {
        source: "generic",
        otel,
        mapping_error: fitText(error instanceof Error ? error.message : String(error), MAX_META_LONG_TEXT)
      },
      started_at: isoOfMillis(start.ms)
    },
    traceId: ids.trace(traceHex),
    otelTraceId: traceHex
  }
}
