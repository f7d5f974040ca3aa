import { type Attrs, indexed, mapStr } from "../Attributes.ts"
import type { Json } from "../TextCleaning.ts"
import { contentValue, toolCall } from "./ChatMessages.ts"

/** OpenLLMetry indexed messages (`gen_ai.prompt.{i}.*` / `gen_ai.completion.{i}.*`) as CCM. */

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

export const openLlmetryMessages = (a: Attrs, prefix: string, defaultRole: string) =>
  indexed(a, prefix).map((m) => openLlmetryMessage(m, defaultRole))
