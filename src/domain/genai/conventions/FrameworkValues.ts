/**
 * Values frameworks serialise in their own wrappers, made plain before they are stored: LangChain's serialized
 * constructor form (`{"lc":1,"type":"constructor","id":[…,"HumanMessage"],"kwargs":{…}}`), wherever it appears
 * (OpenInference `input.value` / `output.value` of LangGraph chains included), becomes chat messages; the AI SDK
 * (v5) tool output wrapper `{"type":"text"|"json","value":…}` becomes its value; a LangChain tool's
 * `{output: ToolMessage}` becomes the message's content; an output message whose content is only text parts (the
 * Responses API's `output_text`, as OpenInference flattens it) has that text as its content.
 */

type Json = Record<string, unknown>

const isRecord = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

const ROLES: ReadonlyMap<string, string> = new Map([
  ["HumanMessage", "user"], ["HumanMessageChunk", "user"], ["AIMessage", "assistant"], ["AIMessageChunk", "assistant"],
  ["SystemMessage", "system"], ["SystemMessageChunk", "system"], ["ToolMessage", "tool"], ["ToolMessageChunk", "tool"],
  ["FunctionMessage", "function"], ["ChatMessage", "chat"]
])

/** Deep enough for `{messages:[…]}` inside a chain state inside a graph state; deeper values are kept as they are. */
const MAX_DEPTH = 8

const toolCalls = (v: unknown): Array<Json> | undefined => {
  if (!Array.isArray(v) || v.length === 0) return undefined
  return v.filter(isRecord).map((c) => ({
    id: typeof c.id === "string" ? c.id : null,
    type: "function",
    function: {
      name: typeof c.name === "string" ? c.name : "",
      arguments: typeof c.args === "string" ? c.args : JSON.stringify(c.args ?? {})
    }
  }))
}

/** One serialized LangChain message as a chat message; undefined when `v` is not one. */
const lcMessage = (v: Json): Json | undefined => {
  if (v.lc !== 1 || v.type !== "constructor" || !Array.isArray(v.id) || !isRecord(v.kwargs)) return undefined
  const cls = v.id[v.id.length - 1]
  let role = typeof cls === "string" ? ROLES.get(cls) : undefined
  if (role === undefined) return undefined
  const kw = v.kwargs
  if (role === "chat") role = typeof kw.role === "string" ? kw.role : "user"
  const message: Json = { role, content: kw.content === undefined ? null : kw.content }
  if (typeof kw.name === "string" && kw.name !== "") message.name = kw.name
  const calls = toolCalls(kw.tool_calls)
  if (calls !== undefined) message.tool_calls = calls
  if (role === "tool" && typeof kw.tool_call_id === "string") message.tool_call_id = kw.tool_call_id
  return message
}

/** `v` with every serialized LangChain message in it replaced by a chat message (the same value when none). */
export const fromLangChainSerialized = (v: unknown, depth = 0): unknown => {
  if (depth > MAX_DEPTH) return v
  if (Array.isArray(v)) {
    let changed = false
    const out = v.map((x) => {
      const y = fromLangChainSerialized(x, depth + 1)
      if (y !== x) changed = true
      return y
    })
    return changed ? out : v
  }
  if (!isRecord(v)) return v
  const message = lcMessage(v)
  if (message !== undefined) return message
  let out: Json | undefined
  for (const key of Object.keys(v)) {
    const y = fromLangChainSerialized(v[key], depth + 1)
    if (y !== v[key]) {
      out ??= { ...v }
      out[key] = y
    }
  }
  return out ?? v
}

/** The AI SDK's tool output `{type:"text"|"json"|"error-text"|"error-json", value}` as its value; other values as they are. */
export const unwrapAiSdkToolOutput = (v: unknown): unknown => {
  const parsed = typeof v === "string" && v.startsWith("{\"type\":") ? safeParse(v) : v
  if (!isRecord(parsed)) return v
  const keys = Object.keys(parsed)
  if (keys.length !== 2 || !("value" in parsed)) return v
  return ["text", "json", "error-text", "error-json"].includes(parsed.type as string) ? parsed.value : v
}

const safeParse = (s: string): unknown => {
  try {
    return JSON.parse(s)
  } catch {
    return s
  }
}

/**
 * OpenInference's `llm.finish_reason` (the OpenAI Agents processor writes it) on a single output message that
 * has none of its own, where the other conventions put theirs.
 */
export const withFinishReason = (output: unknown, finishReason: unknown): unknown => {
  if (typeof finishReason !== "string" || finishReason === "" || !isRecord(output)) return output
  if (typeof output.role !== "string" || output.finish_reason !== undefined) return output
  return { ...output, finish_reason: finishReason }
}

/** A LangChain tool run's output `{output: <ToolMessage>}` (once converted) as the tool's result, the message content. */
export const unwrapToolMessage = (v: unknown): unknown => {
  if (!isRecord(v) || Object.keys(v).length !== 1 || !isRecord(v.output)) return v
  const m = v.output
  return m.role === "tool" && m.content !== undefined ? m.content : v
}

/** An assistant message whose content is a list of text parts only, with the text as its content. */
export const withPlainTextContent = (output: unknown): unknown => {
  if (!isRecord(output) || typeof output.role !== "string" || !Array.isArray(output.content)) return output
  const parts = output.content
  if (parts.length === 0 || !parts.every((p) => isRecord(p) && p.type === "text" && typeof p.text === "string")) return output
  return { ...output, content: parts.map((p) => (p as Json).text).join("") }
}
