/**
 * The request a model call was made with, beyond its messages: the tool definitions the agent offered and the
 * sampling parameters. Every convention spells them differently; this reads them all into the wire names of an
 * OpenAI Chat Completions request (`tools`, `tool_choice`, `temperature`, `max_tokens`, …), so an `llm_call`
 * span's input can be replayed with the same tools and settings. Parameters with no Chat Completions
 * equivalent (`top_k`) are kept under their own name; replay reports them as not reproduced.
 */

import type { ExportMemo } from "../Reuse.ts"

type Attrs = Readonly<Record<string, unknown>>
type Json = Record<string, unknown>

const isRecord = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

const isBlank = (v: unknown) =>
  v === undefined || v === null || (typeof v === "string" && v.trim() === "") || (Array.isArray(v) && v.length === 0)

const parsed = (v: unknown): unknown => {
  if (typeof v !== "string") return v
  try {
    return JSON.parse(v)
  } catch {
    return v
  }
}

const asNumber = (v: unknown): number | undefined => {
  const n = typeof v === "string" && v.trim() !== "" ? Number(v) : v
  return typeof n === "number" && Number.isFinite(n) ? n : undefined
}

const asInt = (v: unknown): number | undefined => {
  const n = asNumber(v)
  return n !== undefined && Number.isInteger(n) && n >= 0 ? n : undefined
}

/**
 * One tool in the Chat Completions form `{type:"function", function:{name, description?, parameters?}}`, from
 * the OpenAI form itself, the flat OTel / AI SDK form (`{type, name, description, parameters | inputSchema}`)
 * or a bare JSON schema with a title. Undefined when no name can be found.
 */
export const chatTool = (raw: unknown): Json | undefined => {
  const v = parsed(raw)
  if (!isRecord(v)) return undefined
  if (isRecord(v.function) && typeof v.function.name === "string") return { type: "function", function: v.function }
  const name = typeof v.name === "string" ? v.name : typeof v.title === "string" ? v.title : undefined
  if (name === undefined || name === "") return undefined
  const parameters =
    v.parameters ??
    v.inputSchema ??
    v.input_schema ??
    v.json_schema ??
    (v.type === "object" && isRecord(v.properties) ? v : undefined)
  return {
    type: "function",
    function: {
      name,
      ...(typeof v.description === "string" ? { description: v.description } : {}),
      ...(isRecord(parameters) ? { parameters } : {}),
      ...(typeof v.strict === "boolean" ? { strict: v.strict } : {})
    }
  }
}

const toolList = (raw: unknown): Array<Json> | undefined => {
  const v = parsed(raw)
  const list = Array.isArray(v) ? v : isRecord(v) ? [v] : []
  const tools = list.map(chatTool).filter((t): t is Json => t !== undefined)
  return tools.length > 0 ? tools : undefined
}

/**
 * Whether a model call's stored input holds every tool of `gen_ai.tool.definitions` as it was sent: each definition
 * in the Chat Completions form (`{type: "function", function: {name, …}}`, nothing else beside), which `chatTool`
 * keeps as it is, and the input's `tools` exactly those. The attribute is then not repeated in `metadata.attributes`
 * (an agent's model calls each carry the same definitions, kilobytes a span); in any other form some of it may be
 * left out of the input, and it is kept there.
 */
export const toolDefinitionsInInput = (raw: unknown, input: unknown, memo?: ExportMemo): boolean => {
  if (isBlank(raw) || !isRecord(input) || !Array.isArray(input.tools)) return false
  if (memo === undefined || typeof raw !== "string") {
    const definitions = definitionsOf(raw)
    return definitions.whole && JSON.stringify(input.tools) === definitions.json
  }
  const definitions = memo.byText("tool definitions", raw, definitionsOf)
  // The input's tools are the very list the same text gave `requestParameters`, unless another attribute's input
  // (langfuse.observation.input) holds its own.
  return (
    definitions.whole && (input.tools === definitionList(raw, memo) || JSON.stringify(input.tools) === definitions.json)
  )
}

/** Whether every definition is in the Chat Completions form, and the JSON text of `toolList` of them. */
const definitionsOf = (raw: unknown): { readonly whole: boolean; readonly json: string } => {
  const v = parsed(raw)
  if (!Array.isArray(v) || v.length === 0) return { whole: false, json: "" }
  const whole = v.every(
    (t) =>
      isRecord(t) &&
      t.type === "function" &&
      isRecord(t.function) &&
      typeof t.function.name === "string" &&
      Object.keys(t).every((k) => k === "type" || k === "function")
  )
  return { whole, json: whole ? JSON.stringify(toolList(v)) : "" }
}

/** `toolList` of `gen_ai.tool.definitions`; with a memo, the list the last span with the same text was given. */
const definitionList = (raw: unknown, memo: ExportMemo | undefined) =>
  memo !== undefined && typeof raw === "string" ? memo.byText("tools", raw, toolList) : toolList(raw)

/** OpenInference `llm.tools.<i>.tool.json_schema` (or its `name`/`description`/`parameters` parts). */
const openInferenceTools = (a: Attrs): Array<Json> | undefined => {
  const byIndex = new Map<number, Json>()
  for (const key of Object.keys(a)) {
    const m = /^llm\.tools\.(\d+)\.tool\.(.+)$/.exec(key)
    if (m === null) continue
    const slot = byIndex.get(Number(m[1])) ?? {}
    slot[m[2]!] = a[key]
    byIndex.set(Number(m[1]), slot)
  }
  if (byIndex.size === 0) return undefined
  const tools = [...byIndex.entries()]
    .sort(([x], [y]) => x - y)
    .map(([, t]) =>
      chatTool(t.json_schema ?? { name: t.name, description: t.description, parameters: parsed(t.parameters) })
    )
    .filter((t): t is Json => t !== undefined)
  return tools.length > 0 ? tools : undefined
}

/** A tool choice in the Chat Completions form, from that form, a bare string or the AI SDK's `{type, toolName}`. */
export const chatToolChoice = (raw: unknown): unknown => {
  const v = parsed(raw)
  if (typeof v === "string") return v === "" ? undefined : v
  if (!isRecord(v)) return undefined
  if (v.type === "tool" && typeof v.toolName === "string") return { type: "function", function: { name: v.toolName } }
  if (v.type === "function" && isRecord(v.function)) return v
  if (v.type === "auto" || v.type === "none" || v.type === "required") return v.type
  if (v.type === "any") return "required"
  return v
}

/** Response format from `gen_ai.output.type` / OpenAI's `response_format` (a string names a type). */
const responseFormat = (raw: unknown): unknown => {
  const v = parsed(raw)
  if (isRecord(v)) return v
  if (v === "json" || v === "json_object") return { type: "json_object" }
  if (v === "json_schema") return { type: "json_schema" }
  return undefined
}

/** Numeric and list parameters, keyed by their Chat Completions name, from a record of provider-style names. */
const fromRecord = (out: Json, r: Json) => {
  const put = (name: string, value: unknown) => {
    if (value !== undefined && out[name] === undefined) out[name] = value
  }
  put("temperature", asNumber(r.temperature))
  put(
    "max_tokens",
    asInt(r.max_tokens ?? r.max_completion_tokens ?? r.max_output_tokens ?? r.maxTokens ?? r.maxOutputTokens)
  )
  put("top_p", asNumber(r.top_p ?? r.topP))
  put("top_k", asNumber(r.top_k ?? r.topK))
  put("frequency_penalty", asNumber(r.frequency_penalty ?? r.frequencyPenalty))
  put("presence_penalty", asNumber(r.presence_penalty ?? r.presencePenalty))
  put("seed", asInt(r.seed))
  put("n", asInt(r.n))
  const stop = parsed(r.stop ?? r.stop_sequences ?? r.stopSequences)
  put("stop", typeof stop === "string" || (Array.isArray(stop) && stop.length > 0) ? stop : undefined)
  if (typeof r.parallel_tool_calls === "boolean") put("parallel_tool_calls", r.parallel_tool_calls)
  put("response_format", r.response_format === undefined ? undefined : responseFormat(r.response_format))
  put("tool_choice", r.tool_choice === undefined ? undefined : chatToolChoice(r.tool_choice))
  put("tools", r.tools === undefined ? undefined : toolList(r.tools))
}

const prefixed = (a: Attrs, prefix: string): Json => {
  const out: Json = {}
  for (const key of Object.keys(a)) if (key.startsWith(prefix)) out[key.slice(prefix.length)] = a[key]
  return out
}

/**
 * The request parameters a model-call span carries, or undefined when it carries none. Sources, first found
 * wins per parameter: OTel GenAI (`gen_ai.tool.definitions`, `gen_ai.request.*`, `gen_ai.output.type`),
 * OpenInference (`llm.tools.*`, `llm.invocation_parameters`), the AI SDK (`ai.prompt.tools`,
 * `ai.prompt.toolChoice`, `ai.settings.*`), Langfuse (`langfuse.observation.model.parameters`) and LangSmith /
 * LangChain (`langsmith.metadata.ls_temperature`, `ls_max_tokens`, `langsmith.metadata.invocation_params`).
 */
export const requestParameters = (a: Attrs, memo?: ExportMemo): Json | undefined => {
  const out: Json = {}
  const tools =
    definitionList(a["gen_ai.tool.definitions"], memo) ?? openInferenceTools(a) ?? toolList(a["ai.prompt.tools"])
  if (tools !== undefined) out.tools = tools
  if (!isBlank(a["ai.prompt.toolChoice"])) out.tool_choice = chatToolChoice(a["ai.prompt.toolChoice"])

  const request = prefixed(a, "gen_ai.request.")
  fromRecord(out, request)
  const format = responseFormat(a["gen_ai.output.type"] ?? a["gen_ai.openai.request.response_format"])
  if (format !== undefined && out.response_format === undefined) out.response_format = format

  for (const key of [
    "llm.invocation_parameters",
    "langfuse.observation.model.parameters",
    "langsmith.metadata.invocation_params"
  ]) {
    const r = parsed(a[key])
    if (isRecord(r)) fromRecord(out, r)
  }
  fromRecord(out, prefixed(a, "ai.settings."))
  fromRecord(out, {
    temperature: a["langsmith.metadata.ls_temperature"],
    max_tokens: a["langsmith.metadata.ls_max_tokens"],
    stop: a["langsmith.metadata.ls_stop"]
  })
  for (const key of Object.keys(out)) if (out[key] === undefined) delete out[key]
  return Object.keys(out).length > 0 ? out : undefined
}

/**
 * An llm_call input with its request parameters: `{messages, tools, tool_choice, temperature, …}` (the shape
 * of a Chat Completions request without the model). An input that is already such an object keeps its own
 * fields; one that is not a message list keeps its value under `messages` only when it is a list.
 */
export const withRequestParameters = (input: unknown, request: Json | undefined): unknown => {
  if (request === undefined) return input
  if (Array.isArray(input)) return { messages: input, ...request }
  if (isRecord(input) && Array.isArray(input.messages)) return { ...request, ...input }
  if (input === undefined) return { messages: [], ...request }
  // A prompt string or another value: kept as the (single) user message so the request stays one object.
  return {
    messages: [{ role: "user", content: typeof input === "string" ? input : JSON.stringify(input) }],
    ...request
  }
}
