import { asText, parseStructured } from "../Attributes.ts"
import { type Json, isRecord } from "../TextCleaning.ts"
import { asOutput, toolCallsOf } from "./ChatMessages.ts"

/** LangChain-serialized payloads (LangSmith `gen_ai.prompt` / `gen_ai.completion`) as CCM. */

const LANGCHAIN_ROLES: ReadonlyMap<string, string> = new Map([
  ["human", "user"],
  ["HumanMessage", "user"],
  ["HumanMessageChunk", "user"],
  ["ai", "assistant"],
  ["AIMessage", "assistant"],
  ["AIMessageChunk", "assistant"],
  ["system", "system"],
  ["SystemMessage", "system"],
  ["SystemMessageChunk", "system"],
  ["tool", "tool"],
  ["ToolMessage", "tool"],
  ["ToolMessageChunk", "tool"],
  ["function", "function"],
  ["FunctionMessage", "function"]
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
export const promptAttribute = (v: unknown): unknown => {
  const parsed = parseStructured(v)
  return typeof parsed === "string" ? parsed : langchainInput(parsed)
}
export const completionAttribute = (v: unknown): unknown => {
  const parsed = parseStructured(v)
  return typeof parsed === "string" ? parsed : langchainOutput(parsed)
}
