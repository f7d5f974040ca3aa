import { asText, isBlank, parseStructured } from "../Attributes.ts"
import { type Json, isRecord, safeStringify } from "../TextCleaning.ts"

/** Chat Completions messages (CCM), the shape every convention's messages are mapped to: shared pieces. */

/** Tool-call arguments and tool results travel as strings in CCM. */
const argString = (v: unknown): string =>
  typeof v === "string" ? v : v === undefined || v === null ? "{}" : safeStringify(v)
export const resultString = (v: unknown): string =>
  typeof v === "string" ? v : v === undefined ? "" : safeStringify(v)
const idOrNull = (v: unknown): string | null => asText(v) ?? null

export const toolCall = (id: unknown, name: unknown, args: unknown): Json => ({
  id: idOrNull(id),
  type: "function",
  function: { name: asText(name) ?? "", arguments: argString(args) }
})

/** OpenAI `{id, function: {name, arguments}}` or LangChain `{id, name, args}` tool calls. */
export const toolCallsOf = (v: unknown): Array<Json> | undefined => {
  const list = parseStructured(v)
  if (!Array.isArray(list) || list.length === 0) return undefined
  const out: Array<Json> = []
  for (const tc of list) {
    if (!isRecord(tc)) continue
    const fn = isRecord(tc.function) ? tc.function : undefined
    out.push(
      fn !== undefined
        ? toolCall(tc.id, fn.name, fn.arguments)
        : toolCall(tc.id ?? tc.toolCallId, tc.name ?? tc.toolName, tc.args ?? tc.arguments ?? tc.input)
    )
  }
  return out.length > 0 ? out : undefined
}

export const toolMessage = (id: unknown, content: unknown): Json => {
  const m: Json = { role: "tool", content: resultString(content) }
  const callId = asText(id)
  if (callId !== undefined) m.tool_call_id = callId
  return m
}

/** A `content` string that is a JSON array of OpenAI content parts becomes that array. */
export const contentValue = (v: unknown): unknown => {
  if (v === undefined) return null
  if (typeof v === "string" && v.length > 1 && v.charCodeAt(0) === 0x5b) {
    const parsed = parseStructured(v)
    if (Array.isArray(parsed) && parsed.length > 0 && parsed.every((p) => isRecord(p) && typeof p.type === "string"))
      return parsed
  }
  return v
}

/** One CCM for one choice, an array for several. */
export const asOutput = (list: unknown): unknown => (Array.isArray(list) && list.length === 1 ? list[0] : list)

export const yields = (v: unknown) => !isBlank(v)
