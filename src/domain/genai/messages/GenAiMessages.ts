import { isBlank, parseStructured } from "../Attributes.ts"
import { type Json, isRecord } from "../TextCleaning.ts"
import { resultString, toolCall, toolMessage } from "./ChatMessages.ts"
import type { ExportMemo } from "../Reuse.ts"

/** OTel GenAI messages (`gen_ai.input.messages`, parts) and system instructions as CCM. */

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
      ccm.content =
        content.length === 1 ? textPart(content[0] as Json) : content.map((p) => textPart(p as Json)).join("\n")
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

const COMMA = 0x2c
const CLOSING_BRACKET = 0x5d

/**
 * The list `text` holds when it is the last list's text (kept in `memo` as `kind`) with elements added before its
 * closing bracket: a model call's `gen_ai.input.messages` is the previous call's with the newest messages appended, so
 * those alone are parsed and mapped, and the earlier ones are the values of the previous span. Undefined otherwise.
 * The last list's text was a JSON array of at least one element, so `text` is JSON exactly when what follows that
 * array's elements and a comma, opened as an array, is a JSON array of at least one element.
 */
const extendedList = (
  text: string,
  defaultRole: string,
  memo: ExportMemo,
  kind: string
): Array<unknown> | undefined => {
  const last = memo.lastOf<ReadonlyArray<unknown>>(kind)
  if (last === undefined || text.length <= last.text.length) return undefined
  const end = last.text.length - 1
  if (text.charCodeAt(end) !== COMMA || !text.startsWith(last.text.slice(0, end))) return undefined
  let added: unknown
  try {
    added = JSON.parse(`[${text.slice(end + 1)}`)
  } catch {
    return undefined
  }
  if (!Array.isArray(added) || added.length === 0) return undefined
  const out = [...last.value]
  for (const m of added) appendOtelMessage(out, m, defaultRole)
  return out
}

/**
 * A parsed OTel message list as CCM; a value that is not a list (a cut JSON string) is returned as is. With a memo, a
 * list that extends the last one of its role is mapped by its new messages only (`extendedList`); the array returned is
 * the caller's, its messages may be shared (frozen).
 */
export const otelMessages = (v: unknown, defaultRole: string, memo?: ExportMemo): unknown => {
  const kind = `messages/${defaultRole}`
  if (memo !== undefined && typeof v === "string") {
    const extended = extendedList(v, defaultRole, memo, kind)
    if (extended !== undefined) return [...memo.keep(kind, v, extended)]
  }
  const parsed = parseStructured(v)
  if (!Array.isArray(parsed)) return parsed
  const out: Array<unknown> = []
  for (const m of parsed) appendOtelMessage(out, m, defaultRole)
  if (
    memo !== undefined &&
    typeof v === "string" &&
    parsed.length > 0 &&
    v.charCodeAt(v.length - 1) === CLOSING_BRACKET
  )
    return [...memo.keep(kind, v, out)]
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
export const withSystem = (messages: unknown, instructions: unknown): unknown => {
  if (isBlank(instructions)) return messages
  const system = systemMessage(instructions)
  if (system === undefined) return messages
  if (!Array.isArray(messages)) return messages === undefined ? [system] : messages
  for (const m of messages) if (isRecord(m) && m.role === "system") return messages
  return [system, ...messages]
}
