import type { OtlpEvent, OtlpSpan } from "#src/domain/Otlp"
import { SPAN_TEXT_LIMITS, type SpanType } from "#src/domain/Span"
import { TOOL_NAME_KEYS } from "./AttributeKeys.ts"
import { type Attrs, type Scan, asText, first, firstText, isBlank, str } from "./Attributes.ts"
import { fitText } from "./TextCleaning.ts"
import { isFrameworkAgentSpan } from "./conventions/AgentIdentity.ts"
import type { ExportMemo } from "./Reuse.ts"

/** The span type decision table (docs/otel-mapping.md, "Span types"), agent spans, aggregate spans and names. */

/** The instrumentation family that decided `span_type` (`metadata.source`, docs/otel-mapping.md). */
export type Source =
  | "otel_genai"
  | "otel_genai_legacy"
  | "openinference"
  | "openllmetry"
  | "vercel_ai"
  | "pydantic_ai"
  | "langsmith"
  | "langfuse"
  | "laminar"
  | "generic"

const SPAN_TYPES: ReadonlySet<string> = new Set([
  "llm_call",
  "tool_call",
  "tool_result",
  "reasoning",
  "action",
  "error",
  "fork_point"
])

const LANGFUSE_TYPES: ReadonlyMap<string, SpanType> = new Map([
  ["generation", "llm_call"],
  ["embedding", "llm_call"],
  ["tool", "tool_call"],
  ["agent", "action"],
  ["chain", "action"],
  ["retriever", "action"],
  ["guardrail", "action"],
  ["evaluator", "action"],
  ["span", "action"],
  ["event", "action"]
])
const OPENINFERENCE_KINDS: ReadonlyMap<string, SpanType> = new Map([
  ["LLM", "llm_call"],
  ["EMBEDDING", "llm_call"],
  ["TOOL", "tool_call"],
  ["AGENT", "action"],
  ["CHAIN", "action"],
  ["RETRIEVER", "action"],
  ["RERANKER", "action"],
  ["GUARDRAIL", "action"],
  ["EVALUATOR", "action"],
  ["PROMPT", "action"]
])
const LANGSMITH_KINDS: ReadonlyMap<string, SpanType> = new Map([
  ["llm", "llm_call"],
  ["embedding", "llm_call"],
  ["tool", "tool_call"],
  ["chain", "action"],
  ["retriever", "action"],
  ["prompt", "action"],
  ["parser", "action"]
])
const OPERATIONS: ReadonlyMap<string, SpanType> = new Map([
  ["chat", "llm_call"],
  ["text_completion", "llm_call"],
  ["generate_content", "llm_call"],
  ["embeddings", "llm_call"],
  ["completion", "llm_call"],
  ["generate", "llm_call"],
  ["execute_tool", "tool_call"],
  ["plan", "reasoning"],
  ["invoke_agent", "action"],
  ["create_agent", "action"],
  ["invoke_workflow", "action"],
  ["retrieval", "action"],
  ["handoff", "action"],
  ["execute_task", "action"]
])
const TRACELOOP_KINDS: ReadonlyMap<string, SpanType> = new Map([
  ["tool", "tool_call"],
  ["workflow", "action"],
  ["task", "action"],
  ["agent", "action"],
  ["handoff", "action"]
])
const LLM_REQUEST_TYPES: ReadonlyMap<string, SpanType> = new Map([
  ["chat", "llm_call"],
  ["completion", "llm_call"],
  ["embedding", "llm_call"],
  ["rerank", "action"]
])

const LEGACY_RUN_KEYS = ["agent_name", "pydantic_ai.all_messages", "final_result", "all_messages_events"]
const TOOL_PRESENCE_KEYS = ["gen_ai.tool.name", "gen_ai.tool.call.id", "ai.toolCall.name", "tool.name"]
const CURRENT_LLM_KEYS = [
  "gen_ai.input.messages",
  "gen_ai.output.messages",
  "gen_ai.usage.input_tokens",
  "gen_ai.request.model",
  "gen_ai.response.model"
]
const OPENINFERENCE_LLM_KEYS = ["llm.token_count.prompt", "llm.model_name"]
const LEGACY_LLM_KEYS = ["gen_ai.usage.prompt_tokens"]

/** The AI SDK operation id (`ai.operationId`, or the first word of `operation.name`), when it is one. */
export const aiOperation = (a: Attrs): string | undefined => {
  const id = str(a, "ai.operationId")
  if (id !== undefined && id.startsWith("ai.")) return id
  const op = str(a, "operation.name")
  if (op === undefined || !op.startsWith("ai.")) return undefined
  const space = op.indexOf(" ")
  return space === -1 ? op : op.slice(0, space)
}

const isAiCall = (op: string) => op.endsWith(".doGenerate") || op.endsWith(".doStream") || op.endsWith(".doEmbed")

export interface Facts {
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
  /** What the export's earlier spans mapped, for this one to reuse (Reuse.ts); undefined: mapped on its own. */
  readonly memo: ExportMemo | undefined
}

const hasEvent = (events: ReadonlyArray<OtlpEvent>, name: string) => {
  for (const e of events) if (e.name === name) return true
  return false
}

/** Rows 2–14 of the decision table: the type and the family that decided it. */
const classify = (f: Facts): { type: SpanType; source: Source } => {
  const a = f.a
  let t: SpanType | undefined
  if (f.langfuseType !== undefined && (t = LANGFUSE_TYPES.get(f.langfuseType)) !== undefined)
    return { type: t, source: "langfuse" }
  if (f.oiKind !== undefined && (t = OPENINFERENCE_KINDS.get(f.oiKind)) !== undefined)
    return { type: t, source: "openinference" }
  if (f.langsmithKind !== undefined && (t = LANGSMITH_KINDS.get(f.langsmithKind)) !== undefined)
    return { type: t, source: "langsmith" }
  if (f.operation !== undefined && (t = OPERATIONS.get(f.operation)) !== undefined)
    return { type: t, source: "otel_genai" }
  if (f.traceloopKind !== undefined && (t = TRACELOOP_KINDS.get(f.traceloopKind)) !== undefined)
    return { type: t, source: "openllmetry" }
  const requestType = str(a, "llm.request.type")
  if (requestType !== undefined && (t = LLM_REQUEST_TYPES.get(requestType)) !== undefined)
    return { type: t, source: "openllmetry" }
  if (f.aiOp !== undefined) {
    return {
      type: isAiCall(f.aiOp) ? "llm_call" : f.aiOp === "ai.toolCall" ? "tool_call" : "action",
      source: "vercel_ai"
    }
  }
  if (str(a, "mcp.method.name") === "tools/call") return { type: "tool_call", source: "otel_genai" }
  if (f.operation === undefined && first(a, LEGACY_RUN_KEYS) !== undefined)
    return { type: "action", source: "pydantic_ai" }
  if (first(a, TOOL_PRESENCE_KEYS) !== undefined) {
    const source: Source =
      !isBlank(a["tool_arguments"]) || !isBlank(a["tool_response"])
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
  if (s.llmInputMessages || first(a, OPENINFERENCE_LLM_KEYS) !== undefined)
    return { type: "llm_call", source: "openinference" }
  if (
    s.genAiPromptIndexed ||
    s.genAiCompletionIndexed ||
    first(a, LEGACY_LLM_KEYS) !== undefined ||
    hasEvent(f.events, "gen_ai.choice") ||
    hasEvent(f.events, "gen_ai.content.completion")
  )
    return { type: "llm_call", source: "otel_genai_legacy" }
  return { type: f.failed ? "error" : "action", source: "generic" }
}

/** "Agents": spans that define an agent (their children inherit its identity). */
export const isAgentSpan = (f: Facts) =>
  f.operation === "invoke_agent" ||
  f.operation === "create_agent" ||
  f.oiKind === "AGENT" ||
  f.traceloopKind === "agent" ||
  f.langfuseType === "agent" ||
  (f.operation === undefined && !isBlank(f.a["agent_name"])) ||
  isFrameworkAgentSpan(f.a, f.aiOp)

/** "Aggregate usage": spans whose usage repeats their children's. An llm_call always owns its usage. */
export const isAggregate = (f: Facts, type: SpanType) => {
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

export const nameOf = (
  span: OtlpSpan,
  type: SpanType,
  operation: string | undefined,
  model: string | undefined,
  tool: string | undefined
) => {
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
  return {
    name: fitText(name, SPAN_TEXT_LIMITS.name),
    original: renamed ? fitText(original, SPAN_TEXT_LIMITS.name) : undefined
  }
}

/** The stored type and its source: `tapedeck.span.type` overrides the type, then a vendor's stated type. */
export const spanTypeOf = (f: Facts, conventionType: SpanType | undefined): { type: SpanType; source: Source } => {
  const decided = classify(f)
  const override = str(f.a, "tapedeck.span.type")
  // The override only replaces the type: `source` still names the instrumentation that sent the span.
  const type: SpanType =
    override !== undefined && SPAN_TYPES.has(override) ? (override as SpanType) : (conventionType ?? decided.type)
  const source: Source = conventionType !== undefined && decided.source === "generic" ? "laminar" : decided.source
  return { type, source }
}

export const toolNameOf = (f: Facts): string | undefined =>
  firstText(f.a, TOOL_NAME_KEYS) ?? (f.traceloopKind === "tool" ? asText(f.a["traceloop.entity.name"]) : undefined)
