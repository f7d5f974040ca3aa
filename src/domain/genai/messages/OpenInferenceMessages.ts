import { type Attrs, indexed, mapStr } from "../Attributes.ts"
import { type Json, setKey } from "../TextCleaning.ts"
import { contentValue, toolCall } from "./ChatMessages.ts"

/** OpenInference flattened messages (`llm.input_messages.{i}.message.*`) as CCM. */

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
      else if (type === "image")
        parts.push({ type: "image_url", image_url: { url: mapStr(c, "message_content.image.image.url") ?? "" } })
      else if (type === "reasoning") (reasoning ??= []).push(mapStr(c, "message_content.text") ?? "")
      else if (type === "tool_use") {
        ;(calls ??= []).push(
          toolCall(
            c.get("message_content.tool_use.id") ?? c.get("message_content.id"),
            c.get("message_content.tool_use.name") ?? c.get("message_content.name"),
            c.get("message_content.tool_use.input") ?? c.get("message_content.input")
          )
        )
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
    ;(calls ??= []).push(
      toolCall(tc.get("tool_call.id"), tc.get("tool_call.function.name"), tc.get("tool_call.function.arguments"))
    )
  }
  if (calls !== undefined) ccm.tool_calls = calls
  const callId = mapStr(m, "message.tool_call_id")
  if (callId !== undefined) ccm.tool_call_id = callId
  if (reasoning !== undefined) ccm.reasoning = reasoning.join("\n")
  return ccm
}

export const openInferenceMessages = (a: Attrs, prefix: string, defaultRole: string) =>
  indexed(a, prefix).map((m) => openInferenceMessage(m, defaultRole))

/** `llm.prompts.{i}.prompt.text` / `llm.choices.{i}.completion.text`: a string, an array when several. */
export const legacyTexts = (a: Attrs, prefix: string, key: string): unknown => {
  const texts = indexed(a, prefix)
    .map((m) => m.get(key))
    .filter((t) => t !== undefined)
  return texts.length === 1 ? texts[0] : texts
}
