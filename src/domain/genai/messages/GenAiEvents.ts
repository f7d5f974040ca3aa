import type { OtlpEvent } from "#src/domain/Otlp"
import { type Attrs, asCount, asText, parseStructured, str } from "../Attributes.ts"
import { type Json, isRecord } from "../TextCleaning.ts"
import { asOutput, contentValue, toolCallsOf } from "./ChatMessages.ts"

/** Span events carrying messages: deprecated per-message events, choices, content events, operation details. */

const EVENT_ROLES: ReadonlyMap<string, string> = new Map([
  ["gen_ai.system.message", "system"],
  ["gen_ai.user.message", "user"],
  ["gen_ai.assistant.message", "assistant"],
  ["gen_ai.tool.message", "tool"]
])
export const EVENT_MESSAGES = 1
export const EVENT_DETAILS = 2
export const EVENT_CONTENT = 4

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
export const eventsInput = (events: ReadonlyArray<EventLike>): Array<Json> | undefined => {
  let out: Array<Json> | undefined
  for (const e of events) {
    const role = EVENT_ROLES.get(e.name)
    if (role !== undefined) (out ??= []).push(eventMessage(role, e.attributes))
  }
  return out
}

export const eventsOutput = (events: ReadonlyArray<EventLike>): unknown => {
  let choices: Array<{ index: number; ccm: Json }> | undefined
  for (const e of events) {
    if (e.name !== "gen_ai.choice") continue
    ;(choices ??= []).push({
      index: asCount(e.attributes["index"]) ?? choices.length,
      ccm: choiceMessage(e.attributes)
    })
  }
  if (choices === undefined) return undefined
  choices.sort((x, y) => x.index - y.index)
  return asOutput(choices.map((c) => c.ccm))
}

export const findEvent = (events: ReadonlyArray<OtlpEvent>, name: string): OtlpEvent | undefined => {
  for (const e of events) if (e.name === name) return e
  return undefined
}

/** Pydantic AI v1 `events` attribute: a JSON list of event-shaped dicts. */
export const pydanticEvents = (v: unknown): Array<EventLike> | undefined => {
  const parsed = parseStructured(v)
  if (!Array.isArray(parsed)) return undefined
  const out: Array<EventLike> = []
  for (const e of parsed)
    if (isRecord(e) && typeof e["event.name"] === "string") out.push({ name: e["event.name"], attributes: e })
  return out.length > 0 ? out : undefined
}

export const isConsumedEvent = (name: string, used: number) =>
  ((used & EVENT_MESSAGES) !== 0 && (EVENT_ROLES.has(name) || name === "gen_ai.choice")) ||
  ((used & EVENT_DETAILS) !== 0 && name === "gen_ai.client.inference.operation.details") ||
  ((used & EVENT_CONTENT) !== 0 && (name === "gen_ai.content.prompt" || name === "gen_ai.content.completion"))
