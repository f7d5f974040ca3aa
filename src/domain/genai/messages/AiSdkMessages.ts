import { type Attrs, first, parseStructured, str } from "../Attributes.ts"
import { type Json, isRecord, safeStringify } from "../TextCleaning.ts"
import { unwrapAiSdkToolOutput } from "../conventions/FrameworkValues.ts"
import { resultString, toolCall, toolCallsOf, toolMessage } from "./ChatMessages.ts"

/** Vercel AI SDK `ai.prompt.messages` and `ai.response.*` as CCM. */

export const aiSdkMessages = (v: unknown): unknown => {
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

export const aiSdkOutput = (a: Attrs): Json | undefined => {
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
