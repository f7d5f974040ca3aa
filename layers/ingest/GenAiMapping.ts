import { MAX_AMOUNT, MAX_JSON_DEPTH, MAX_SPAN_COUNT } from "#src/domain/Json"
import { isoOfMillis } from "#src/domain/Instant"
import type { OtlpEvent, OtlpSpan } from "#src/domain/Otlp"
import { SPAN_TEXT_LIMITS, type SpanType } from "#src/domain/Span"
import { isConventionKey, readConventions } from "./conventions/Conventions.ts"
import { parentUuid, spanUuid, traceUuid, uuidV5 } from "./OtlpIds.ts"
import { requestParameters, withRequestParameters } from "./conventions/RequestParameters.ts"
import { frameworkAgentId, isFrameworkAgentSpan } from "./conventions/AgentIdentity.ts"
import { fromLangChainSerialized, unwrapAiSdkToolOutput, withFinishReason } from "./conventions/FrameworkValues.ts"
import { isFrameworkPlumbing } from "./conventions/Plumbing.ts"

/**
 * The GenAI mapping of one OTLP span to our span (docs/otel-mapping.md). Pure and total:
 * every value it returns can be stored as PostgreSQL jsonb/text and is within the span limits.
 *
 * Besides the layout of docs/otel-mapping.md ("Span metadata"), `metadata` persists what the per-trace finalize pass (TraceFinalize.ts) reads
 * back from storage, since it has nothing else:
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

/** The instrumentation family that decided `span_type` (`metadata.source`, docs/otel-mapping.md). */
export type Source =
  | "otel_genai" | "otel_genai_legacy" | "openinference" | "openllmetry" | "vercel_ai"
  | "pydantic_ai" | "langsmith" | "langfuse" | "laminar" | "generic"

type Attrs = Readonly<Record<string, unknown>>
type Json = Record<string, unknown>

/** Largest stored `input` / `output`, in serialised characters (docs/otel-mapping.md, "Input and output"). */
const MAX_IO_CHARS = 1_048_576
/** Largest stored error string (docs/otel-mapping.md, "Errors"). */
const MAX_ERROR_CHARS = 4000
const MAX_STACKTRACE_CHARS = 16_000
const MAX_HINT_IO_CHARS = 262_144
const ATTRIBUTES_BUDGET = 65_536
const RESOURCE_BUDGET = 16_384
const EVENTS_BUDGET = 32_768
const MAX_EVENTS = 32
const MAX_META_TEXT = 1000
const MAX_META_LONG_TEXT = 4000
const MAX_TAGS = 50
const MAX_TAG_CHARS = 200
/** Characters kept of one vendor's span details, and of a span's trace metadata hint. */
const CONVENTION_BUDGET = 16_384
/** Latest instant the `Instant` schema accepts (9999-12-31T23:59:59.999Z). */
const MAX_MS = Date.UTC(10000, 0, 1) - 1

const OVERFLOW: unique symbol = Symbol("overflow")

interface Budget {
  left: number
  readonly maxString: number
}

const isRecord = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/** Replaces NUL characters and unpaired surrogates, which PostgreSQL refuses. */
const cleanText = (s: string): string => {
  let t = s
  if (t.indexOf("\u0000") !== -1) t = t.replaceAll("\u0000", "\uFFFD")
  return t.isWellFormed() ? t : t.toWellFormed()
}

/** At most `max` UTF-16 units without splitting a surrogate pair, and storable. */
const fitText = (s: string, max: number): string => {
  if (s.length <= max) return cleanText(s)
  let end = max
  const last = s.charCodeAt(end - 1)
  if (last >= 0xd800 && last <= 0xdbff) end -= 1
  return cleanText(s.slice(0, end))
}

const safeStringify = (v: unknown): string => {
  try {
    return JSON.stringify(v) ?? "null"
  } catch {
    // A cycle or a stack overflow on absurd nesting: keep a marker rather than fail the span.
    return "\"[unserialisable]\""
  }
}

/** Writes a key even when it is `__proto__` (attribute keys are arbitrary strings). */
const setKey = (target: Json, key: string, value: unknown) => {
  if (key === "__proto__") Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
  else target[key] = value
}

/**
 * A storable copy of a JSON-like value: strings cleaned and capped, non-finite numbers as strings, nesting
 * folded into a string at the jsonb depth limit. Copy-on-write, so clean input allocates nothing.
 * `OVERFLOW` when the budget (approximate serialised characters) runs out.
 */
const cleanValue = (v: unknown, depth: number, b: Budget): unknown => {
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
const fitValue = (v: unknown, depth: number, maxChars: number, maxString = maxChars): { value: unknown; cut: boolean } => {
  const c = cleanValue(v, depth, { left: maxChars, maxString })
  if (c !== OVERFLOW) return { value: c === undefined ? null : c, cut: false }
  return { value: fitText(typeof v === "string" ? v : safeStringify(v), maxChars), cut: true }
}

const small = (v: unknown): unknown => fitValue(v, 3, 4 * MAX_META_LONG_TEXT, MAX_META_LONG_TEXT).value

const isBlank = (v: unknown): boolean => {
  if (v === undefined || v === null || v === "") return true
  if (typeof v !== "object") return false
  if (Array.isArray(v)) return v.length === 0
  for (const _ in v) return false
  return true
}

const first = (a: Attrs, keys: ReadonlyArray<string>): unknown => {
  for (const key of keys) {
    const v = a[key]
    if (!isBlank(v)) return v
  }
  return undefined
}

/** A non-empty string attribute. */
const str = (a: Attrs, key: string): string | undefined => {
  const v = a[key]
  return typeof v === "string" && v !== "" ? v : undefined
}

/** Strings, and numbers or booleans written as strings (ids are sometimes sent as integers). */
const asText = (v: unknown): string | undefined => {
  if (typeof v === "string") return v === "" ? undefined : v
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : undefined
  if (typeof v === "boolean") return String(v)
  return undefined
}

const firstText = (a: Attrs, keys: ReadonlyArray<string>): string | undefined => {
  for (const key of keys) {
    const t = asText(a[key])
    if (t !== undefined) return t
  }
  return undefined
}

const firstString = (a: Attrs, keys: ReadonlyArray<string>): string | undefined => {
  for (const key of keys) {
    const t = str(a, key)
    if (t !== undefined) return t
  }
  return undefined
}

/** A token count: an integer 0..1e12 from a number or a numeric string; anything else is absent. `+ 0` makes -0 a 0. */
const asCount = (v: unknown): number | undefined => {
  let n: number
  if (typeof v === "number") n = v
  else if (typeof v === "string" && v.trim() !== "") n = Number(v)
  else return undefined
  if (!Number.isFinite(n) || n < 0) return undefined
  return Math.min(Math.round(n), MAX_SPAN_COUNT) + 0
}

const firstCount = (a: Attrs, keys: ReadonlyArray<string>): number | undefined => {
  for (const key of keys) {
    const n = asCount(a[key])
    if (n !== undefined) return n
  }
  return undefined
}

/** A cost: a finite number ≥ 0 (capped at the column's maximum). */
const asAmount = (v: unknown): number | undefined => {
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
const parseJsonish = (v: unknown): unknown => {
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
const parseStructured = (v: unknown): unknown => {
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

const parseJsonAlways = (v: unknown): unknown => {
  if (typeof v !== "string") return v
  try {
    return JSON.parse(v)
  } catch {
    return v
  }
}

const firstParsed = (a: Attrs, keys: ReadonlyArray<string>): unknown => {
  for (const key of keys) {
    const v = a[key]
    if (!isBlank(v)) return parseJsonish(v)
  }
  return undefined
}

interface Scan {
  llmInputMessages: boolean
  llmOutputMessages: boolean
  llmPrompts: boolean
  llmChoices: boolean
  genAiPromptIndexed: boolean
  genAiCompletionIndexed: boolean
  aggregatedUsage: boolean
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39

/** Which indexed family a key belongs to (0 = none); indexed keys never go to `metadata.attributes`. */
const indexedFamily = (key: string): number => {
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

const scanKeys = (a: Attrs): Scan => {
  const s: Scan = {
    llmInputMessages: false, llmOutputMessages: false, llmPrompts: false, llmChoices: false,
    genAiPromptIndexed: false, genAiCompletionIndexed: false, aggregatedUsage: false
  }
  for (const key in a) {
    switch (indexedFamily(key)) {
      case 1: s.llmInputMessages = true; break
      case 2: s.llmOutputMessages = true; break
      case 3: s.llmPrompts = true; break
      case 4: s.llmChoices = true; break
      case 5: s.genAiPromptIndexed = true; break
      case 6: s.genAiCompletionIndexed = true; break
      case 7: if (!isBlank(a[key])) s.aggregatedUsage = true; break
    }
  }
  return s
}

/**
 * Flattened keys `{prefix}{i}.{rest}` grouped by index, in index order: one Map of `rest` → value per index.
 */
const indexed = (a: Attrs | ReadonlyMap<string, unknown>, prefix: string): Array<Map<string, unknown>> => {
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

const mapStr = (m: ReadonlyMap<string, unknown>, key: string): string | undefined => asText(m.get(key))

const SPAN_TYPES: ReadonlySet<string> = new Set([
  "llm_call", "tool_call", "tool_result", "reasoning", "action", "error", "fork_point"
])

const LANGFUSE_TYPES: ReadonlyMap<string, SpanType> = new Map([
  ["generation", "llm_call"], ["embedding", "llm_call"], ["tool", "tool_call"], ["agent", "action"],
  ["chain", "action"], ["retriever", "action"], ["guardrail", "action"], ["evaluator", "action"],
  ["span", "action"], ["event", "action"]
])
const OPENINFERENCE_KINDS: ReadonlyMap<string, SpanType> = new Map([
  ["LLM", "llm_call"], ["EMBEDDING", "llm_call"], ["TOOL", "tool_call"], ["AGENT", "action"], ["CHAIN", "action"],
  ["RETRIEVER", "action"], ["RERANKER", "action"], ["GUARDRAIL", "action"], ["EVALUATOR", "action"], ["PROMPT", "action"]
])
const LANGSMITH_KINDS: ReadonlyMap<string, SpanType> = new Map([
  ["llm", "llm_call"], ["embedding", "llm_call"], ["tool", "tool_call"], ["chain", "action"],
  ["retriever", "action"], ["prompt", "action"], ["parser", "action"]
])
const OPERATIONS: ReadonlyMap<string, SpanType> = new Map([
  ["chat", "llm_call"], ["text_completion", "llm_call"], ["generate_content", "llm_call"], ["embeddings", "llm_call"],
  ["completion", "llm_call"], ["generate", "llm_call"], ["execute_tool", "tool_call"], ["plan", "reasoning"],
  ["invoke_agent", "action"], ["create_agent", "action"], ["invoke_workflow", "action"], ["retrieval", "action"],
  ["handoff", "action"], ["execute_task", "action"]
])
const TRACELOOP_KINDS: ReadonlyMap<string, SpanType> = new Map([
  ["tool", "tool_call"], ["workflow", "action"], ["task", "action"], ["agent", "action"], ["handoff", "action"]
])
const LLM_REQUEST_TYPES: ReadonlyMap<string, SpanType> = new Map([
  ["chat", "llm_call"], ["completion", "llm_call"], ["embedding", "llm_call"], ["rerank", "action"]
])

const LEGACY_RUN_KEYS = ["agent_name", "pydantic_ai.all_messages", "final_result", "all_messages_events"]
const TOOL_PRESENCE_KEYS = ["gen_ai.tool.name", "gen_ai.tool.call.id", "ai.toolCall.name", "tool.name"]
const CURRENT_LLM_KEYS = [
  "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.usage.input_tokens", "gen_ai.request.model",
  "gen_ai.response.model"
]
const OPENINFERENCE_LLM_KEYS = ["llm.token_count.prompt", "llm.model_name"]
const LEGACY_LLM_KEYS = ["gen_ai.usage.prompt_tokens"]

/** The AI SDK operation id (`ai.operationId`, or the first word of `operation.name`), when it is one. */
const aiOperation = (a: Attrs): string | undefined => {
  const id = str(a, "ai.operationId")
  if (id !== undefined && id.startsWith("ai.")) return id
  const op = str(a, "operation.name")
  if (op === undefined || !op.startsWith("ai.")) return undefined
  const space = op.indexOf(" ")
  return space === -1 ? op : op.slice(0, space)
}

const isAiCall = (op: string) => op.endsWith(".doGenerate") || op.endsWith(".doStream") || op.endsWith(".doEmbed")

interface Facts {
  readonly a: Attrs
  readonly events: ReadonlyArray<OtlpEvent>
  readonly scan: Scan
  readonly operation: string | undefined
  readonly aiOp: string | undefined
  readonly oiKind: string | undefined
  readonly traceloopKind: string | undefined
  readonly langfuseType: string | undefined
  readonly langsmithKind: string | undefined
  readonly failed: boolean
}

const hasEvent = (events: ReadonlyArray<OtlpEvent>, name: string) => {
  for (const e of events) if (e.name === name) return true
  return false
}

/** Rows 2–14 of the decision table: the type and the family that decided it. */
const classify = (f: Facts): { type: SpanType; source: Source } => {
  const a = f.a
  let t: SpanType | undefined
  if (f.langfuseType !== undefined && (t = LANGFUSE_TYPES.get(f.langfuseType)) !== undefined) return { type: t, source: "langfuse" }
  if (f.oiKind !== undefined && (t = OPENINFERENCE_KINDS.get(f.oiKind)) !== undefined) return { type: t, source: "openinference" }
  if (f.langsmithKind !== undefined && (t = LANGSMITH_KINDS.get(f.langsmithKind)) !== undefined) return { type: t, source: "langsmith" }
  if (f.operation !== undefined && (t = OPERATIONS.get(f.operation)) !== undefined) return { type: t, source: "otel_genai" }
  if (f.traceloopKind !== undefined && (t = TRACELOOP_KINDS.get(f.traceloopKind)) !== undefined) return { type: t, source: "openllmetry" }
  const requestType = str(a, "llm.request.type")
  if (requestType !== undefined && (t = LLM_REQUEST_TYPES.get(requestType)) !== undefined) return { type: t, source: "openllmetry" }
  if (f.aiOp !== undefined) {
    return { type: isAiCall(f.aiOp) ? "llm_call" : f.aiOp === "ai.toolCall" ? "tool_call" : "action", source: "vercel_ai" }
  }
  if (str(a, "mcp.method.name") === "tools/call") return { type: "tool_call", source: "otel_genai" }
  if (f.operation === undefined && first(a, LEGACY_RUN_KEYS) !== undefined) return { type: "action", source: "pydantic_ai" }
  if (first(a, TOOL_PRESENCE_KEYS) !== undefined) {
    const source: Source = !isBlank(a["tool_arguments"]) || !isBlank(a["tool_response"])
      ? "pydantic_ai"
      : !isBlank(a["gen_ai.tool.name"]) || !isBlank(a["gen_ai.tool.call.id"])
      ? "otel_genai"
      : !isBlank(a["ai.toolCall.name"])
      ? "vercel_ai"
      : "openinference"
    return { type: "tool_call", source }
  }
  const s = f.scan
  if (first(a, CURRENT_LLM_KEYS) !== undefined) return { type: "llm_call", source: "otel_genai" }
  if (s.llmInputMessages || first(a, OPENINFERENCE_LLM_KEYS) !== undefined) return { type: "llm_call", source: "openinference" }
  if (
    s.genAiPromptIndexed || s.genAiCompletionIndexed || first(a, LEGACY_LLM_KEYS) !== undefined ||
    hasEvent(f.events, "gen_ai.choice") || hasEvent(f.events, "gen_ai.content.completion")
  ) return { type: "llm_call", source: "otel_genai_legacy" }
  return { type: f.failed ? "error" : "action", source: "generic" }
}

/** "Agents": spans that define an agent (their children inherit its identity). */
const isAgentSpan = (f: Facts) =>
  f.operation === "invoke_agent" || f.operation === "create_agent" || f.oiKind === "AGENT" ||
  f.traceloopKind === "agent" || f.langfuseType === "agent" ||
  (f.operation === undefined && !isBlank(f.a["agent_name"])) || isFrameworkAgentSpan(f.a, f.aiOp)

/** "Aggregate usage": spans whose usage repeats their children's. An llm_call always owns its usage. */
const isAggregate = (f: Facts, type: SpanType) => {
  if (type === "llm_call") return false
  if (f.scan.aggregatedUsage) return true
  if (f.aiOp !== undefined && !isAiCall(f.aiOp) && f.aiOp !== "ai.toolCall") return true
  if (f.operation === "invoke_agent" || f.operation === "invoke_workflow") return true
  if (f.oiKind === "AGENT" || f.oiKind === "CHAIN") return true
  if (f.traceloopKind === "workflow" || f.traceloopKind === "task" || f.traceloopKind === "agent") return true
  if (f.langsmithKind === "chain") return true
  // Langfuse's own agent/chain observations repeat their children the same way (our reading).
  if (f.langfuseType === "agent" || f.langfuseType === "chain") return true
  return f.operation === undefined && first(f.a, LEGACY_RUN_KEYS) !== undefined
}

/** Tool-call arguments and tool results travel as strings in CCM. */
const argString = (v: unknown): string => (typeof v === "string" ? v : v === undefined || v === null ? "{}" : safeStringify(v))
const resultString = (v: unknown): string => (typeof v === "string" ? v : v === undefined ? "" : safeStringify(v))
const idOrNull = (v: unknown): string | null => asText(v) ?? null

const toolCall = (id: unknown, name: unknown, args: unknown): Json => ({
  id: idOrNull(id),
  type: "function",
  function: { name: asText(name) ?? "", arguments: argString(args) }
})

/** OpenAI `{id, function: {name, arguments}}` or LangChain `{id, name, args}` tool calls. */
const toolCallsOf = (v: unknown): Array<Json> | undefined => {
  const list = parseStructured(v)
  if (!Array.isArray(list) || list.length === 0) return undefined
  const out: Array<Json> = []
  for (const tc of list) {
    if (!isRecord(tc)) continue
    const fn = isRecord(tc.function) ? tc.function : undefined
    out.push(fn !== undefined
      ? toolCall(tc.id, fn.name, fn.arguments)
      : toolCall(tc.id ?? tc.toolCallId, tc.name ?? tc.toolName, tc.args ?? tc.arguments ?? tc.input))
  }
  return out.length > 0 ? out : undefined
}

const toolMessage = (id: unknown, content: unknown): Json => {
  const m: Json = { role: "tool", content: resultString(content) }
  const callId = asText(id)
  if (callId !== undefined) m.tool_call_id = callId
  return m
}

/** A `content` string that is a JSON array of OpenAI content parts becomes that array. */
const contentValue = (v: unknown): unknown => {
  if (v === undefined) return null
  if (typeof v === "string" && v.length > 1 && v.charCodeAt(0) === 0x5b) {
    const parsed = parseStructured(v)
    if (Array.isArray(parsed) && parsed.length > 0 && parsed.every((p) => isRecord(p) && typeof p.type === "string")) return parsed
  }
  return v
}

const textPart = (p: Json): string => (typeof p.content === "string" ? p.content : resultString(p.content))

const imagePart = (p: Json): Json | undefined => {
  if (p.modality !== "image") return undefined
  if (p.type === "uri" && typeof p.uri === "string") return { type: "image_url", image_url: { url: p.uri } }
  if (p.type === "blob" && typeof p.content === "string") {
    const mime = typeof p.mime_type === "string" && p.mime_type !== "" ? p.mime_type : "image/png"
    return { type: "image_url", image_url: { url: `data:${mime};base64,${p.content}` } }
  }
  return undefined
}

/**
 * One OTel GenAI message (`{role, parts[], name?, finish_reason?}`) appended as CCM. Every
 * `tool_call_response` part becomes its own `tool` message, placed before the carrying message's remainder
 * (Pydantic AI puts tool returns in `user` messages); the carrying message is dropped when nothing is left.
 */
const appendOtelMessage = (out: Array<unknown>, m: unknown, defaultRole: string) => {
  if (!isRecord(m) || !Array.isArray(m.parts)) {
    out.push(m)
    return
  }
  let content: Array<unknown> | undefined
  let rich = false
  let reasoning: Array<string> | undefined
  let toolCalls: Array<Json> | undefined
  let responses = 0
  for (const p of m.parts) {
    if (!isRecord(p)) {
      ;(content ??= []).push(p)
      rich = true
      continue
    }
    switch (p.type) {
      case "text":
        ;(content ??= []).push(p)
        break
      case "reasoning":
        ;(reasoning ??= []).push(textPart(p))
        break
      case "tool_call":
        ;(toolCalls ??= []).push(toolCall(p.id, p.name, p.arguments))
        break
      case "tool_call_response":
        out.push(toolMessage(p.id, p.response !== undefined ? p.response : p.result))
        responses++
        break
      default:
        ;(content ??= []).push(p)
        rich = true
    }
  }
  if (responses > 0 && content === undefined && toolCalls === undefined && reasoning === undefined) return
  const ccm: Json = { role: typeof m.role === "string" && m.role !== "" ? m.role : defaultRole, content: null }
  if (content !== undefined) {
    if (!rich) {
      ccm.content = content.length === 1 ? textPart(content[0] as Json) : content.map((p) => textPart(p as Json)).join("\n")
    } else {
      ccm.content = content.map((p) => {
        if (!isRecord(p)) return p
        if (p.type === "text") return { type: "text", text: textPart(p) }
        return imagePart(p) ?? p
      })
    }
  }
  if (typeof m.name === "string" && m.name !== "") ccm.name = m.name
  if (toolCalls !== undefined) ccm.tool_calls = toolCalls
  if (reasoning !== undefined) ccm.reasoning = reasoning.join("\n")
  if (typeof m.finish_reason === "string" && m.finish_reason !== "") ccm.finish_reason = m.finish_reason
  out.push(ccm)
}

/** A parsed OTel message list as CCM; a value that is not a list (a cut JSON string) is returned as is. */
const otelMessages = (v: unknown, defaultRole: string): unknown => {
  const parsed = parseStructured(v)
  if (!Array.isArray(parsed)) return parsed
  const out: Array<unknown> = []
  for (const m of parsed) appendOtelMessage(out, m, defaultRole)
  return out
}

/** `gen_ai.system_instructions` (parts, or a plain string) as one system message. */
const systemMessage = (v: unknown): Json | undefined => {
  const parsed = parseStructured(v)
  if (typeof parsed === "string") return { role: "system", content: parsed }
  if (!Array.isArray(parsed)) return isBlank(parsed) ? undefined : { role: "system", content: parsed }
  const out: Array<unknown> = []
  const parts = parsed.map((p) => (typeof p === "string" ? { type: "text", content: p } : p))
  appendOtelMessage(out, { role: "system", parts }, "system")
  const last = out[out.length - 1]
  return isRecord(last) ? last : undefined
}

/** Prepends the system instructions unless the input already has a system message (Langfuse's rule). */
const withSystem = (messages: unknown, instructions: unknown): unknown => {
  if (isBlank(instructions)) return messages
  const system = systemMessage(instructions)
  if (system === undefined) return messages
  if (!Array.isArray(messages)) return messages === undefined ? [system] : messages
  for (const m of messages) if (isRecord(m) && m.role === "system") return messages
  return [system, ...messages]
}

/** One CCM for one choice, an array for several. */
const asOutput = (list: unknown): unknown => (Array.isArray(list) && list.length === 1 ? list[0] : list)

const yields = (v: unknown) => !isBlank(v)

// OpenInference flattened messages.
const openInferenceMessage = (m: ReadonlyMap<string, unknown>, defaultRole: string): Json => {
  const ccm: Json = { role: mapStr(m, "message.role") ?? defaultRole, content: null }
  const text = m.get("message.content")
  if (text !== undefined) ccm.content = contentValue(text)
  let reasoning: Array<string> | undefined
  let calls: Array<Json> | undefined
  const contents = indexed(m, "message.contents.")
  if (contents.length > 0) {
    const parts: Array<unknown> = []
    for (const c of contents) {
      const type = mapStr(c, "message_content.type")
      if (type === "text") parts.push({ type: "text", text: mapStr(c, "message_content.text") ?? "" })
      else if (type === "image") parts.push({ type: "image_url", image_url: { url: mapStr(c, "message_content.image.image.url") ?? "" } })
      else if (type === "reasoning") (reasoning ??= []).push(mapStr(c, "message_content.text") ?? "")
      else if (type === "tool_use") {
        ;(calls ??= []).push(toolCall(
          c.get("message_content.tool_use.id") ?? c.get("message_content.id"),
          c.get("message_content.tool_use.name") ?? c.get("message_content.name"),
          c.get("message_content.tool_use.input") ?? c.get("message_content.input")
        ))
      } else {
        const part: Json = {}
        for (const [key, value] of c) setKey(part, key.startsWith("message_content.") ? key.slice(16) : key, value)
        parts.push(part)
      }
    }
    if (parts.length > 0) ccm.content = parts
  }
  const name = mapStr(m, "message.name")
  if (name !== undefined) ccm.name = name
  for (const tc of indexed(m, "message.tool_calls.")) {
    ;(calls ??= []).push(toolCall(tc.get("tool_call.id"), tc.get("tool_call.function.name"), tc.get("tool_call.function.arguments")))
  }
  if (calls !== undefined) ccm.tool_calls = calls
  const callId = mapStr(m, "message.tool_call_id")
  if (callId !== undefined) ccm.tool_call_id = callId
  if (reasoning !== undefined) ccm.reasoning = reasoning.join("\n")
  return ccm
}

const openInferenceMessages = (a: Attrs, prefix: string, defaultRole: string) =>
  indexed(a, prefix).map((m) => openInferenceMessage(m, defaultRole))

/** `llm.prompts.{i}.prompt.text` / `llm.choices.{i}.completion.text`: a string, an array when several. */
const legacyTexts = (a: Attrs, prefix: string, key: string): unknown => {
  const texts = indexed(a, prefix).map((m) => m.get(key)).filter((t) => t !== undefined)
  return texts.length === 1 ? texts[0] : texts
}

// OpenLLMetry indexed `gen_ai.prompt.{i}.*` / `gen_ai.completion.{i}.*`.
const openLlmetryMessage = (m: ReadonlyMap<string, unknown>, defaultRole: string): Json => {
  const ccm: Json = { role: mapStr(m, "role") ?? defaultRole, content: contentValue(m.get("content")) }
  const name = mapStr(m, "name")
  if (name !== undefined) ccm.name = name
  const calls = indexed(m, "tool_calls.").map((tc) => toolCall(tc.get("id"), tc.get("name"), tc.get("arguments")))
  if (calls.length > 0) ccm.tool_calls = calls
  const callId = mapStr(m, "tool_call_id")
  if (callId !== undefined) ccm.tool_call_id = callId
  const finish = mapStr(m, "finish_reason")
  if (finish !== undefined) ccm.finish_reason = finish
  return ccm
}

const openLlmetryMessages = (a: Attrs, prefix: string, defaultRole: string) =>
  indexed(a, prefix).map((m) => openLlmetryMessage(m, defaultRole))

// Vercel AI SDK `ai.prompt.messages`.
const aiSdkMessages = (v: unknown): unknown => {
  const parsed = parseStructured(v)
  if (!Array.isArray(parsed)) return parsed
  const out: Array<unknown> = []
  for (const m of parsed) {
    if (!isRecord(m)) {
      out.push(m)
      continue
    }
    const role = typeof m.role === "string" && m.role !== "" ? m.role : "user"
    if (!Array.isArray(m.content)) {
      out.push({ role, content: m.content ?? null })
      continue
    }
    let items: Array<unknown> | undefined
    let rich = false
    let reasoning: Array<string> | undefined
    let calls: Array<Json> | undefined
    let results = 0
    for (const p of m.content) {
      if (!isRecord(p)) {
        ;(items ??= []).push(p)
        rich = true
        continue
      }
      switch (p.type) {
        case "text":
          ;(items ??= []).push({ type: "text", text: typeof p.text === "string" ? p.text : resultString(p.text) })
          break
        case "reasoning":
          ;(reasoning ??= []).push(typeof p.text === "string" ? p.text : resultString(p.text))
          break
        case "tool-call":
          ;(calls ??= []).push(toolCall(p.toolCallId, p.toolName, p.input !== undefined ? p.input : p.args))
          break
        case "tool-result":
          out.push(toolMessage(p.toolCallId, p.output !== undefined ? unwrapAiSdkToolOutput(p.output) : p.result))
          results++
          break
        default:
          ;(items ??= []).push(p)
          rich = true
      }
    }
    if (results > 0 && items === undefined && calls === undefined && reasoning === undefined) continue
    const ccm: Json = { role, content: null }
    if (items !== undefined) ccm.content = !rich && items.length === 1 ? (items[0] as Json).text : items
    if (calls !== undefined) ccm.tool_calls = calls
    if (reasoning !== undefined) ccm.reasoning = reasoning.join("\n")
    out.push(ccm)
  }
  return out
}

const aiSdkOutput = (a: Attrs): Json | undefined => {
  const text = str(a, "ai.response.text") ?? str(a, "ai.result.text")
  const object = first(a, ["ai.response.object", "ai.result.object"])
  const calls = toolCallsOf(first(a, ["ai.response.toolCalls", "ai.result.toolCalls"]))
  if (text === undefined && object === undefined && calls === undefined) return undefined
  const ccm: Json = {
    role: "assistant",
    content: text ?? (object === undefined ? null : typeof object === "string" ? object : safeStringify(object))
  }
  if (calls !== undefined) ccm.tool_calls = calls
  const reasoning = first(a, ["ai.response.reasoning", "ai.response.reasoningText"])
  if (reasoning !== undefined) ccm.reasoning = typeof reasoning === "string" ? reasoning : resultString(reasoning)
  const finish = str(a, "ai.response.finishReason") ?? str(a, "ai.result.finishReason")
  if (finish !== undefined) ccm.finish_reason = finish
  return ccm
}

// LangChain-serialized payloads (LangSmith `gen_ai.prompt` / `gen_ai.completion`).
const LANGCHAIN_ROLES: ReadonlyMap<string, string> = new Map([
  ["human", "user"], ["HumanMessage", "user"], ["HumanMessageChunk", "user"],
  ["ai", "assistant"], ["AIMessage", "assistant"], ["AIMessageChunk", "assistant"],
  ["system", "system"], ["SystemMessage", "system"], ["SystemMessageChunk", "system"],
  ["tool", "tool"], ["ToolMessage", "tool"], ["ToolMessageChunk", "tool"],
  ["function", "function"], ["FunctionMessage", "function"]
])

/** A LangChain message (serialized constructor or plain dict) as CCM; an OpenAI-style message as is. */
const langchainMessage = (m: unknown): unknown => {
  if (!isRecord(m)) return m
  const kw = isRecord(m.kwargs) ? m.kwargs : m
  const cls = Array.isArray(m.id) ? m.id[m.id.length - 1] : undefined
  let role = typeof kw.type === "string" ? LANGCHAIN_ROLES.get(kw.type) : undefined
  if (role === undefined && typeof cls === "string") role = LANGCHAIN_ROLES.get(cls)
  if (role === undefined && (kw.type === "chat" || cls === "ChatMessage") && typeof kw.role === "string") role = kw.role
  if (role === undefined) return m
  const ccm: Json = { role, content: kw.content === undefined ? null : kw.content }
  if (typeof kw.name === "string" && kw.name !== "") ccm.name = kw.name
  const calls = toolCallsOf(kw.tool_calls)
  if (calls !== undefined) ccm.tool_calls = calls
  if (role === "tool" && asText(kw.tool_call_id) !== undefined) ccm.tool_call_id = asText(kw.tool_call_id)
  return ccm
}

const langchainInput = (parsed: unknown): unknown => {
  if (Array.isArray(parsed)) return parsed.map(langchainMessage)
  if (!isRecord(parsed) || !Array.isArray(parsed.messages)) return parsed
  const messages = parsed.messages
  if (messages.length > 0 && messages.every(Array.isArray)) {
    const batches = (messages as Array<Array<unknown>>).map((batch) => batch.map(langchainMessage))
    return batches.length === 1 ? batches[0] : batches
  }
  return messages.map(langchainMessage)
}

const langchainOutput = (parsed: unknown): unknown => {
  if (Array.isArray(parsed)) return asOutput(parsed.map(langchainMessage))
  if (!isRecord(parsed) || !Array.isArray(parsed.generations)) return parsed
  let g: unknown = parsed.generations[0]
  if (Array.isArray(g)) g = g[0]
  if (!isRecord(g)) return parsed
  if (isRecord(g.message)) {
    const ccm = langchainMessage(g.message)
    if (ccm !== g.message) return ccm
  }
  return typeof g.text === "string" ? { role: "assistant", content: g.text } : parsed
}

/** `gen_ai.prompt` / `gen_ai.completion` attributes: plain text stays text, JSON is LangChain or OpenAI. */
const promptAttribute = (v: unknown): unknown => {
  const parsed = parseStructured(v)
  return typeof parsed === "string" ? parsed : langchainInput(parsed)
}
const completionAttribute = (v: unknown): unknown => {
  const parsed = parseStructured(v)
  return typeof parsed === "string" ? parsed : langchainOutput(parsed)
}

// Span events (deprecated per-message events, choices, content events, operation details).
const EVENT_ROLES: ReadonlyMap<string, string> = new Map([
  ["gen_ai.system.message", "system"], ["gen_ai.user.message", "user"],
  ["gen_ai.assistant.message", "assistant"], ["gen_ai.tool.message", "tool"]
])
const EVENT_MESSAGES = 1
const EVENT_DETAILS = 2
const EVENT_CONTENT = 4

interface EventLike {
  readonly name: string
  readonly attributes: Attrs
}

const eventMessage = (role: string, a: Attrs): Json => {
  const ccm: Json = { role: str(a, "role") ?? role, content: contentValue(a["content"]) }
  const calls = toolCallsOf(a["tool_calls"])
  if (calls !== undefined) ccm.tool_calls = calls
  const id = asText(a["id"])
  if (ccm.role === "tool" && id !== undefined) ccm.tool_call_id = id
  const name = str(a, "name")
  if (name !== undefined) ccm.name = name
  return ccm
}

const choiceMessage = (a: Attrs): Json => {
  const raw = parseStructured(a["message"])
  const msg = isRecord(raw) ? raw : {}
  const ccm: Json = {
    role: typeof msg.role === "string" && msg.role !== "" ? msg.role : "assistant",
    content: contentValue(msg.content ?? (typeof raw === "string" ? raw : undefined))
  }
  const calls = toolCallsOf(msg.tool_calls ?? a["tool_calls"])
  if (calls !== undefined) ccm.tool_calls = calls
  const finish = str(a, "finish_reason")
  if (finish !== undefined) ccm.finish_reason = finish
  return ccm
}

/** Input messages from `gen_ai.{role}.message` events; output from `gen_ai.choice` events ordered by index. */
const eventsInput = (events: ReadonlyArray<EventLike>): Array<Json> | undefined => {
  let out: Array<Json> | undefined
  for (const e of events) {
    const role = EVENT_ROLES.get(e.name)
    if (role !== undefined) (out ??= []).push(eventMessage(role, e.attributes))
  }
  return out
}

const eventsOutput = (events: ReadonlyArray<EventLike>): unknown => {
  let choices: Array<{ index: number; ccm: Json }> | undefined
  for (const e of events) {
    if (e.name !== "gen_ai.choice") continue
    ;(choices ??= []).push({ index: asCount(e.attributes["index"]) ?? choices.length, ccm: choiceMessage(e.attributes) })
  }
  if (choices === undefined) return undefined
  choices.sort((x, y) => x.index - y.index)
  return asOutput(choices.map((c) => c.ccm))
}

const findEvent = (events: ReadonlyArray<OtlpEvent>, name: string): OtlpEvent | undefined => {
  for (const e of events) if (e.name === name) return e
  return undefined
}

/** Pydantic AI v1 `events` attribute: a JSON list of event-shaped dicts. */
const pydanticEvents = (v: unknown): Array<EventLike> | undefined => {
  const parsed = parseStructured(v)
  if (!Array.isArray(parsed)) return undefined
  const out: Array<EventLike> = []
  for (const e of parsed) if (isRecord(e) && typeof e["event.name"] === "string") out.push({ name: e["event.name"], attributes: e })
  return out.length > 0 ? out : undefined
}

interface IoState {
  usedEvents: number
}

const llmInput = (f: Facts, io: IoState): unknown => {
  const a = f.a
  let v = firstParsed(a, ["langfuse.observation.input"])
  if (yields(v)) return v
  const instructions = a["gen_ai.system_instructions"]
  if (!isBlank(a["gen_ai.input.messages"])) {
    v = withSystem(otelMessages(a["gen_ai.input.messages"], "user"), instructions)
    if (yields(v)) return v
  }
  if (f.scan.llmInputMessages && yields(v = openInferenceMessages(a, "llm.input_messages.", "user"))) return v
  if (f.scan.llmPrompts && yields(v = legacyTexts(a, "llm.prompts.", "prompt.text"))) return v
  if (f.scan.genAiPromptIndexed && yields(v = openLlmetryMessages(a, "gen_ai.prompt.", "user"))) return v
  if (!isBlank(a["ai.prompt.messages"]) && yields(v = aiSdkMessages(a["ai.prompt.messages"]))) return v
  const details = findEvent(f.events, "gen_ai.client.inference.operation.details")
  if (details !== undefined && !isBlank(details.attributes["gen_ai.input.messages"])) {
    v = withSystem(otelMessages(details.attributes["gen_ai.input.messages"], "user"), details.attributes["gen_ai.system_instructions"])
    if (yields(v)) {
      io.usedEvents |= EVENT_DETAILS
      return v
    }
  }
  if (f.events.length > 0 && yields(v = eventsInput(f.events))) {
    io.usedEvents |= EVENT_MESSAGES
    return v
  }
  const contentPrompt = findEvent(f.events, "gen_ai.content.prompt")
  if (contentPrompt !== undefined && yields(v = promptAttribute(contentPrompt.attributes["gen_ai.prompt"]))) {
    io.usedEvents |= EVENT_CONTENT
    return v
  }
  if (!isBlank(a["gen_ai.prompt"]) && yields(v = promptAttribute(a["gen_ai.prompt"]))) return v
  const legacy = isBlank(a["events"]) ? undefined : pydanticEvents(a["events"])
  if (legacy !== undefined && yields(v = eventsInput(legacy))) return v
  if (yields(v = ioValue(a, "input.value", "input.mime_type"))) return v
  // System instructions alone still say what the model was told.
  return isBlank(instructions) ? undefined : withSystem(undefined, instructions)
}

const llmOutput = (f: Facts, io: IoState): unknown => {
  const a = f.a
  let v = firstParsed(a, ["langfuse.observation.output"])
  if (yields(v)) return v
  if (!isBlank(a["gen_ai.output.messages"]) && yields(v = asOutput(otelMessages(a["gen_ai.output.messages"], "assistant")))) return v
  if (f.scan.llmOutputMessages && yields(v = asOutput(openInferenceMessages(a, "llm.output_messages.", "assistant")))) return v
  if (f.scan.llmChoices && yields(v = legacyTexts(a, "llm.choices.", "completion.text"))) return v
  if (f.scan.genAiCompletionIndexed && yields(v = asOutput(openLlmetryMessages(a, "gen_ai.completion.", "assistant")))) return v
  if (yields(v = aiSdkOutput(a))) return v
  const details = findEvent(f.events, "gen_ai.client.inference.operation.details")
  if (details !== undefined && !isBlank(details.attributes["gen_ai.output.messages"])) {
    v = asOutput(otelMessages(details.attributes["gen_ai.output.messages"], "assistant"))
    if (yields(v)) {
      io.usedEvents |= EVENT_DETAILS
      return v
    }
  }
  if (f.events.length > 0 && yields(v = eventsOutput(f.events))) {
    io.usedEvents |= EVENT_MESSAGES
    return v
  }
  const contentCompletion = findEvent(f.events, "gen_ai.content.completion")
  if (contentCompletion !== undefined && yields(v = completionAttribute(contentCompletion.attributes["gen_ai.completion"]))) {
    io.usedEvents |= EVENT_CONTENT
    return v
  }
  if (!isBlank(a["gen_ai.completion"]) && yields(v = completionAttribute(a["gen_ai.completion"]))) return v
  const legacy = isBlank(a["events"]) ? undefined : pydanticEvents(a["events"])
  if (legacy !== undefined && yields(v = eventsOutput(legacy))) return v
  return ioValue(a, "output.value", "output.mime_type")
}

/** `input.value` / `output.value`: parsed only when the mime type says JSON. */
const ioValue = (a: Attrs, key: string, mimeKey: string): unknown => {
  const v = a[key]
  if (isBlank(v)) return undefined
  const mime = str(a, mimeKey)
  // LangGraph / LangChain chains (OpenInference) put their serialized messages here.
  return mime !== undefined && mime.toLowerCase().startsWith("application/json") ? fromLangChainSerialized(parseJsonAlways(v)) : v
}

const toolInput = (a: Attrs): unknown =>
  firstParsed(a, ["langfuse.observation.input", "gen_ai.tool.call.arguments", "ai.toolCall.args", "tool_arguments"]) ??
  ioValue(a, "input.value", "input.mime_type") ??
  (isBlank(a["traceloop.entity.input"]) ? undefined : parseJsonAlways(a["traceloop.entity.input"])) ??
  firstParsed(a, ["gen_ai.prompt"])

const toolOutput = (a: Attrs): unknown =>
  firstParsed(a, ["langfuse.observation.output", "gen_ai.tool.call.result"]) ??
  unwrapAiSdkToolOutput(firstParsed(a, ["ai.toolCall.result"])) ?? firstParsed(a, ["tool_response"]) ??
  ioValue(a, "output.value", "output.mime_type") ??
  (isBlank(a["traceloop.entity.output"]) ? undefined : parseJsonAlways(a["traceloop.entity.output"])) ??
  firstParsed(a, ["gen_ai.completion"])

const actionInput = (a: Attrs): unknown => {
  let v = firstParsed(a, ["langfuse.observation.input"]) ?? ioValue(a, "input.value", "input.mime_type")
  if (v !== undefined) return v
  if (!isBlank(a["traceloop.entity.input"])) return parseJsonAlways(a["traceloop.entity.input"])
  if (!isBlank(a["gen_ai.input.messages"]) && yields(v = withSystem(otelMessages(a["gen_ai.input.messages"], "user"), a["gen_ai.system_instructions"]))) return v
  if (!isBlank(a["pydantic_ai.all_messages"]) && yields(v = otelMessages(a["pydantic_ai.all_messages"], "user"))) return v
  return firstParsed(a, ["ai.prompt", "gen_ai.prompt"])
}

const actionOutput = (a: Attrs): unknown => {
  let v = firstParsed(a, ["langfuse.observation.output"]) ?? ioValue(a, "output.value", "output.mime_type")
  if (v !== undefined) return v
  if (!isBlank(a["traceloop.entity.output"])) return parseJsonAlways(a["traceloop.entity.output"])
  if (!isBlank(a["gen_ai.output.messages"]) && yields(v = asOutput(otelMessages(a["gen_ai.output.messages"], "assistant")))) return v
  return firstParsed(a, ["final_result"]) ?? str(a, "ai.response.text") ?? firstParsed(a, ["ai.response.object", "gen_ai.completion"])
}

const MODEL_KEYS = [
  "langfuse.observation.model.name", "gen_ai.response.model", "gen_ai.request.model", "llm.response.model_name",
  "llm.model_name", "llm.request.model_name", "ai.response.model", "ai.model.id", "embedding.model_name",
  "langsmith.metadata.ls_model_name"
]
// `llm.system` (the AI product) before `llm.provider` (the host): fixture 5 expects `openai`, not `azure`.
const PROVIDER_KEYS = [
  "gen_ai.provider.name", "gen_ai.system", "llm.system", "llm.provider", "ai.model.provider", "langsmith.metadata.ls_provider"
]
const INPUT_TOKEN_KEYS = [
  "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt", "ai.usage.inputTokens",
  "ai.usage.promptTokens", "ai.usage.tokens"
]
const OUTPUT_TOKEN_KEYS = [
  "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion", "ai.usage.outputTokens",
  "ai.usage.completionTokens"
]
const CACHE_READ_KEYS = [
  "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
  "llm.token_count.prompt_details.cache_read", "ai.usage.cachedInputTokens"
]
const CACHE_WRITE_KEYS = [
  "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_write.input_tokens",
  "gen_ai.usage.cache_creation_input_tokens", "llm.token_count.prompt_details.cache_write"
]
const REASONING_KEYS = [
  "gen_ai.usage.reasoning.output_tokens", "llm.token_count.completion_details.reasoning", "ai.usage.reasoningTokens",
  "gen_ai.usage.reasoning_tokens"
]
const TOTAL_KEYS = ["gen_ai.usage.total_tokens", "llm.token_count.total", "llm.usage.total_tokens", "ai.usage.totalTokens"]
const COST_KEYS = ["gen_ai.usage.cost", "llm.cost.total", "operation.cost"]
const TOOL_NAME_KEYS = ["gen_ai.tool.name", "ai.toolCall.name", "tool.name"]
const TOOL_CALL_ID_KEYS = ["gen_ai.tool.call.id", "ai.toolCall.id", "tool.id"]
const TOOL_DESCRIPTION_KEYS = ["gen_ai.tool.description", "tool.description"]
/** Session keys, in order (docs/otel-mapping.md, "Traces"); never `langsmith.trace.session_id` (the LangSmith project). */
const SESSION_KEYS = [
  "langfuse.session.id", "session.id", "gen_ai.conversation.id", "traceloop.association.properties.session_id",
  "langsmith.metadata.session_id", "langsmith.metadata.thread_id", "langsmith.metadata.conversation_id",
  "ai.telemetry.metadata.sessionId"
]
const USER_KEYS = ["user.id", "langfuse.user.id", "traceloop.association.properties.user_id", "ai.telemetry.metadata.userId"]
/**
 * The names an instrumentation gives the run itself, in order: Langfuse's explicit trace name, OpenLLMetry's and
 * the GenAI conventions' workflow name, then the Vercel AI SDK's `functionId` (its root span is `ai.generateText`).
 */
const TRACE_NAME_KEYS = ["langfuse.trace.name", "traceloop.workflow.name", "gen_ai.workflow.name", "ai.telemetry.functionId"]
const TAG_KEYS = ["langfuse.trace.tags", "tag.tags", "langsmith.span.tags"]
const ENVIRONMENT_KEYS = ["langfuse.environment", "deployment.environment.name", "deployment.environment"]

/**
 * Keys whose value is represented in a span field or in the structured metadata, so they are not repeated in
 * `metadata.attributes`. Content keys count even when another source won: they are alternative encodings of
 * the same messages, and repeating them would double the stored size.
 */
const CONSUMED: ReadonlySet<string> = new Set([
  "tapedeck.span.type", "langfuse.observation.type", "openinference.span.kind", "langsmith.span.kind",
  "gen_ai.operation.name", "traceloop.span.kind", "llm.request.type", "ai.operationId",
  ...MODEL_KEYS, ...PROVIDER_KEYS.filter((k) => k !== "llm.provider"), ...INPUT_TOKEN_KEYS, ...OUTPUT_TOKEN_KEYS,
  ...CACHE_READ_KEYS, ...CACHE_WRITE_KEYS, ...REASONING_KEYS, ...TOTAL_KEYS, ...COST_KEYS,
  "gen_ai.aggregated_usage.input_tokens", "gen_ai.aggregated_usage.output_tokens", "gen_ai.aggregated_usage.cost",
  "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "ai.prompt.messages", "ai.prompt",
  "gen_ai.prompt", "gen_ai.completion", "input.value", "input.mime_type", "output.value", "output.mime_type",
  "langfuse.observation.input", "langfuse.observation.output", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
  "ai.toolCall.args", "ai.toolCall.result", "tool_arguments", "tool_response", "traceloop.entity.input",
  "traceloop.entity.output", "pydantic_ai.all_messages", "final_result", "ai.response.text", "ai.response.object",
  "ai.response.toolCalls", "ai.response.reasoning", "ai.response.reasoningText", "ai.response.finishReason",
  "ai.result.text", "ai.result.object", "ai.result.toolCalls", "ai.result.finishReason", "events",
  "gen_ai.response.id", "gen_ai.response.finish_reasons", "gen_ai.conversation.id",
  ...TOOL_NAME_KEYS, ...TOOL_CALL_ID_KEYS, ...TOOL_DESCRIPTION_KEYS, "gen_ai.tool.type",
  "gen_ai.agent.id", "gen_ai.agent.name", "gen_ai.agent.description", "gen_ai.agent.version",
  ...SESSION_KEYS, ...USER_KEYS, ...TRACE_NAME_KEYS, ...TAG_KEYS, "langfuse.trace.input", "langfuse.trace.output",
  ...ENVIRONMENT_KEYS
])

const KIND_NAMES = ["UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]
const STATUS_NAMES = ["UNSET", "OK", "ERROR"]

/** Unix nanoseconds (decimal string) as epoch milliseconds plus the sub-millisecond rest; undefined if invalid. */
const nanos = (s: string): { ms: number; rest: number } | undefined => {
  if (typeof s !== "string" || s.length === 0 || s.length > 30) return undefined
  for (let i = 0; i < s.length; i++) if (!isDigit(s.charCodeAt(i))) return undefined
  if (s.length <= 6) return { ms: 0, rest: Number(s) }
  const ms = Number(s.slice(0, -6))
  // Instants past year 9999 cannot be stored; they are clamped rather than refused.
  return ms > MAX_MS ? { ms: MAX_MS, rest: 0 } : { ms, rest: Number(s.slice(-6)) }
}

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

const nameOf = (span: OtlpSpan, type: SpanType, operation: string | undefined, model: string | undefined, tool: string | undefined) => {
  const original = typeof span.name === "string" ? span.name.trim() : ""
  let name = original
  if (name === "") {
    const parts = [operation, model ?? tool].filter((p) => p !== undefined)
    name = parts.length > 0 ? parts.join(" ") : "span"
  }
  let renamed = false
  if (type === "tool_call" && tool !== undefined && !name.includes(tool)) {
    name = "execute_tool " + tool
    renamed = original !== ""
  }
  return { name: fitText(name, SPAN_TEXT_LIMITS.name), original: renamed ? fitText(original, SPAN_TEXT_LIMITS.name) : undefined }
}

/** "Errors": the failure verdict and the error string. */
const failureOf = (span: OtlpSpan, a: Attrs) => {
  const failed = span.status?.code === 2 || !isBlank(a["error.type"]) || str(a, "langfuse.observation.level") === "ERROR"
  if (!failed) return { failed, error: undefined, exception: undefined as OtlpEvent | undefined }
  let exception: OtlpEvent | undefined
  for (const e of span.events) if (e.name === "exception") exception = e
  const ea = exception?.attributes
  const type = (ea !== undefined ? asText(ea["exception.type"]) : undefined) ?? asText(a["error.type"])
  const message = (ea !== undefined ? asText(ea["exception.message"]) : undefined) ??
    (span.status?.message || undefined) ?? asText(a["langfuse.observation.status_message"])
  const text = type !== undefined && message !== undefined ? `${type}: ${message}` : type ?? message ?? "error"
  return { failed, error: fitText(text, MAX_ERROR_CHARS), exception }
}

const metaText = (v: string | undefined, max = MAX_META_TEXT) => (v === undefined ? undefined : fitText(v, max))

const put = (target: Json, key: string, value: unknown) => {
  if (value !== undefined) target[key] = value
}

/** Remaining attributes (or resource attributes) within a budget; `dropped` counts keys left out. */
const remainder = (
  a: Attrs,
  depth: number,
  budget: number,
  maxString: number,
  skip: boolean
): { value: Json | undefined; dropped: number } => {
  let out: Json | undefined
  let dropped = 0
  const b: Budget = { left: budget, maxString }
  for (const key in a) {
    if (skip && (CONSUMED.has(key) || isConventionKey(key) || indexedFamily(key) !== 0)) continue
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


/**
 * Maps one decoded OTLP span to our span, or `undefined` for a span that is deliberately skipped (a Logfire
 * `pending_span` placeholder duplicating a real span). Never throws: a span the mapper cannot make sense of
 * is still stored, as a bare `action` with `metadata.mapping_error`.
 */
export const mapSpan = (accountNs: string, span: OtlpSpan): MappedSpan | undefined => {
  const a: Attrs = span.attributes ?? {}
  if (a["logfire.span_type"] === "pending_span") return undefined
  try {
    return mapChecked(accountNs, span, a)
  } catch (error) {
    return fallback(accountNs, span, error)
  }
}

const mapChecked = (accountNs: string, span: OtlpSpan, a: Attrs): MappedSpan => {
  const traceHex = span.traceId.toLowerCase()
  const spanHex = span.spanId.toLowerCase()
  const parentHex = span.parentSpanId ? span.parentSpanId.toLowerCase() : null
  const events = span.events ?? []
  const resource: Attrs = span.resource ?? {}

  const operation = str(a, "gen_ai.operation.name")
  const oi = str(a, "openinference.span.kind")
  const failure = failureOf(span, a)
  // Vendor SDK attributes (Langfuse, Laminar, OpenInference) beyond the conventions read here.
  const conv = readConventions(a, resource)
  const f: Facts = {
    a, events, scan: scanKeys(a), operation, aiOp: aiOperation(a),
    oiKind: oi?.toUpperCase(), traceloopKind: str(a, "traceloop.span.kind"),
    langfuseType: str(a, "langfuse.observation.type"), langsmithKind: str(a, "langsmith.span.kind"),
    failed: failure.failed
  }

  const decided = classify(f)
  const override = str(a, "tapedeck.span.type")
  // The override only replaces the type: `source` still names the instrumentation that sent the span.
  const type: SpanType = override !== undefined && SPAN_TYPES.has(override) ? (override as SpanType) : conv.type ?? decided.type
  const source: Source = conv.type !== undefined && decided.source === "generic" ? "laminar" : decided.source

  const modelRaw = firstString(a, MODEL_KEYS)
  const model = metaText(modelRaw, SPAN_TEXT_LIMITS.model)
  const toolName = firstText(a, TOOL_NAME_KEYS) ??
    (f.traceloopKind === "tool" ? asText(a["traceloop.entity.name"]) : undefined)
  const { name, original } = nameOf(span, type, operation ?? f.aiOp, modelRaw, toolName)

  // Usage: an aggregate span keeps it in metadata only ("Aggregate usage").
  const aggregate = isAggregate(f, type)
  const usageDetails = parseStructured(a["langfuse.observation.usage_details"])
  const details = isRecord(usageDetails) ? usageDetails : undefined
  const inputTokens = firstCount(a, INPUT_TOKEN_KEYS) ?? (details !== undefined ? asCount(details.input) : undefined)
  const outputTokens = firstCount(a, OUTPUT_TOKEN_KEYS) ?? (details !== undefined ? asCount(details.output) : undefined)
  const cost = costOf(a)

  const io: IoState = { usedEvents: 0 }
  let input: unknown
  let output: unknown
  switch (type) {
    case "llm_call":
      // Tools and sampling parameters travel with the messages, so a replay can send the same request.
      input = withRequestParameters(llmInput(f, io), requestParameters(a))
      output = withFinishReason(llmOutput(f, io), a["llm.finish_reason"])
      break
    case "tool_call":
    case "tool_result":
      input = toolInput(a)
      output = toolOutput(a)
      break
    default:
      input = actionInput(a)
      output = actionOutput(a)
  }
  input ??= conv.input
  output ??= conv.output

  const start = nanos(span.startTimeUnixNano) ?? { ms: 0, rest: 0 }
  const end = nanos(span.endTimeUnixNano)
  const hasEnd = end !== undefined && (end.ms > 0 || end.rest > 0)

  const out: MappedSpan["span"] = {
    id: spanUuid(accountNs, traceHex, spanHex),
    parent_id: parentHex === null ? null : parentUuid(accountNs, traceHex, parentHex),
    span_type: type,
    name,
    metadata: {},
    started_at: isoOfMillis(start.ms)
  }
  if (model !== undefined) out.model = model
  const truncated: Array<string> = []
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
  if (!aggregate) {
    if (inputTokens !== undefined) out.input_tokens = inputTokens
    if (outputTokens !== undefined) out.output_tokens = outputTokens
    if (cost !== undefined) out.cost = cost
  }
  if (hasEnd) {
    const durationNs = (end.ms - start.ms) * 1e6 + (end.rest - start.rest)
    out.duration_ms = Math.min(Math.max(Math.round(durationNs / 1e6), 0), MAX_SPAN_COUNT)
  }

  // The span's own agent identity; inherited values are resolved by finalize.
  const agentSpan = isAgentSpan(f)
  const traceloopAgent = f.traceloopKind === "agent" ? asText(a["traceloop.entity.name"]) : undefined
  const ownId = metaText(
    firstText(a, ["gen_ai.agent.id", "gen_ai.agent.name", "agent.name"]) ?? traceloopAgent ?? asText(a["agent_name"]) ??
      frameworkAgentId(a, agentSpan),
    SPAN_TEXT_LIMITS.agent_id
  )
  const ownRole = metaText(firstText(a, ["gen_ai.agent.name", "agent.name"]) ?? traceloopAgent ?? asText(a["agent_name"]), SPAN_TEXT_LIMITS.agent_role)
  if (ownId !== undefined) out.agent_id = ownId
  if (ownRole !== undefined && ownId !== undefined) out.agent_role = ownRole
  if (hasEnd) out.ended_at = isoOfMillis(end.ms)
  if (failure.error !== undefined) out.error = failure.error

  // metadata (docs/otel-mapping.md, "Span metadata").
  const meta = out.metadata
  meta.source = source
  if (isFrameworkPlumbing(span.name, a, type !== "action" || agentSpan)) meta.framework_plumbing = true
  const otel: Json = { trace_id: traceHex, span_id: spanHex }
  if (parentHex !== null) otel.parent_span_id = parentHex
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
  if (parentHex === null) otel.root = true
  else if ((span.flags & 0x300) === 0x300) otel.local_root = true
  if (failure.failed) otel.failed = true
  meta.otel = otel

  const genAi: Json = {}
  put(genAi, "operation", metaText(operation))
  put(genAi, "provider", metaText(firstText(a, PROVIDER_KEYS)))
  put(genAi, "request_model", metaText(str(a, "gen_ai.request.model")))
  put(genAi, "response_model", metaText(str(a, "gen_ai.response.model")))
  put(genAi, "response_id", metaText(asText(a["gen_ai.response.id"])))
  if (!isBlank(a["gen_ai.response.finish_reasons"])) genAi.finish_reasons = small(parseStructured(a["gen_ai.response.finish_reasons"]))
  put(genAi, "conversation_id", metaText(asText(a["gen_ai.conversation.id"])))
  const usage: Json = {}
  put(usage, "cache_read_input_tokens", firstCount(a, CACHE_READ_KEYS) ?? conv.cachedInputTokens)
  put(usage, "cache_creation_input_tokens", firstCount(a, CACHE_WRITE_KEYS))
  put(usage, "reasoning_output_tokens", firstCount(a, REASONING_KEYS))
  put(usage, "total_tokens", firstCount(a, TOTAL_KEYS))
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
  if (!isBlank(genAi)) meta.gen_ai = genAi

  if (agentSpan || ownId !== undefined) {
    const own: Json = { is_agent_span: agentSpan }
    put(own, "own_id", ownId)
    if (ownId !== undefined) put(own, "own_role", ownRole)
    meta.agent = own
  }

  if (aggregate) {
    const totals: Json = {}
    put(totals, "input_tokens", asCount(a["gen_ai.aggregated_usage.input_tokens"]) ?? inputTokens)
    put(totals, "output_tokens", asCount(a["gen_ai.aggregated_usage.output_tokens"]) ?? outputTokens)
    put(totals, "cost", asAmount(a["gen_ai.aggregated_usage.cost"]) ?? cost)
    if (!isBlank(totals)) meta.aggregate_usage = totals
  }

  put(meta, "session_id", metaText(firstText(a, SESSION_KEYS) ?? conv.sessionId))
  put(meta, "user_id", metaText(firstText(a, USER_KEYS) ?? conv.userId))
  for (const vendor in conv.spanDetails) {
    const fit = fitValue(conv.spanDetails[vendor], 1, CONVENTION_BUDGET, MAX_META_LONG_TEXT)
    meta[vendor] = fit.value
    if (fit.cut) truncated.push(vendor)
  }

  if (failure.exception !== undefined) {
    const ea = failure.exception.attributes
    const exception: Json = {}
    put(exception, "type", metaText(asText(ea["exception.type"])))
    put(exception, "message", metaText(asText(ea["exception.message"]), MAX_META_LONG_TEXT))
    put(exception, "stacktrace", metaText(asText(ea["exception.stacktrace"]), MAX_STACKTRACE_CHARS))
    if (typeof ea["exception.escaped"] === "boolean") exception.escaped = ea["exception.escaped"]
    meta.exception = exception
  }

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
  put(hints, "release", metaText(conv.release))
  put(hints, "version", metaText(conv.version))
  // A project named by the sender: the same UUID for the same account and name, on every instance.
  if (conv.projectName !== undefined) hints.project_id = uuidV5(accountNs, "project:" + conv.projectName)
  if (!isBlank(hints)) meta.trace_hints = hints

  const rest = remainder(a, 2, ATTRIBUTES_BUDGET, MAX_META_LONG_TEXT * 2, true)
  if (rest.value !== undefined) meta.attributes = rest.value
  if (rest.dropped > 0) truncated.push("attributes")
  if (!isBlank(resource)) {
    const res = remainder(resource, 2, RESOURCE_BUDGET, MAX_META_TEXT * 2, false)
    if (res.value !== undefined) meta.resource = res.value
    if (res.dropped > 0) truncated.push("resource")
  }
  if (events.length > 0) {
    const kept = keptEvents(events, io.usedEvents, failure.exception)
    if (kept.value.length > 0) meta.events = kept.value
    if (kept.cut) truncated.push("events")
  }
  if (truncated.length > 0) meta.truncated = truncated

  return { span: out, traceId: traceUuid(accountNs, traceHex), otelTraceId: traceHex }
}

const costOf = (a: Attrs): number | undefined => {
  const details = parseStructured(a["langfuse.observation.cost_details"])
  if (isRecord(details)) {
    const total = asAmount(details.total)
    if (total !== undefined) return total
    let sum: number | undefined
    for (const key in details) {
      const n = asAmount(details[key])
      if (n !== undefined) sum = (sum ?? 0) + n
    }
    if (sum !== undefined) return Math.min(sum, MAX_AMOUNT)
  }
  for (const key of COST_KEYS) {
    const n = asAmount(a[key])
    if (n !== undefined) return n
  }
  const prompt = asAmount(a["llm.cost.prompt"])
  const completion = asAmount(a["llm.cost.completion"])
  return prompt === undefined && completion === undefined ? undefined : Math.min((prompt ?? 0) + (completion ?? 0), MAX_AMOUNT)
}

const isConsumedEvent = (name: string, used: number) =>
  ((used & EVENT_MESSAGES) !== 0 && (EVENT_ROLES.has(name) || name === "gen_ai.choice")) ||
  ((used & EVENT_DETAILS) !== 0 && name === "gen_ai.client.inference.operation.details") ||
  ((used & EVENT_CONTENT) !== 0 && (name === "gen_ai.content.prompt" || name === "gen_ai.content.completion"))

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

const fallback = (accountNs: string, span: OtlpSpan, error: unknown): MappedSpan => {
  const traceHex = String(span.traceId).toLowerCase()
  const spanHex = String(span.spanId).toLowerCase()
  const parentHex = span.parentSpanId ? String(span.parentSpanId).toLowerCase() : null
  const start = nanos(span.startTimeUnixNano) ?? { ms: 0, rest: 0 }
  const otel: Json = { trace_id: traceHex, span_id: spanHex }
  if (parentHex !== null) otel.parent_span_id = parentHex
  if (parentHex === null) otel.root = true
  else if ((Number(span.flags) & 0x300) === 0x300) otel.local_root = true
  if (span.status?.code === 2) otel.failed = true
  const name = typeof span.name === "string" && span.name.trim() !== "" ? fitText(span.name.trim(), SPAN_TEXT_LIMITS.name) : "span"
  return {
    span: {
      id: spanUuid(accountNs, traceHex, spanHex),
      parent_id: parentHex === null ? null : parentUuid(accountNs, traceHex, parentHex),
      span_type: span.status?.code === 2 ? "error" : "action",
      name,
      metadata: {
        source: "generic",
        otel,
        mapping_error: fitText(error instanceof Error ? error.message : String(error), MAX_META_LONG_TEXT)
      },
      started_at: isoOfMillis(start.ms)
    },
    traceId: traceUuid(accountNs, traceHex),
    otelTraceId: traceHex
  }
}
