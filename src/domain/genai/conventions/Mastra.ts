import { isRecord, parsed, set, textOf, type ConventionReading } from "./Reading.ts"

type Attrs = Readonly<Record<string, unknown>>
type Json = Record<string, unknown>

/**
 * Mastra's OpenTelemetry exporter puts what its spans saw under `mastra.<span type>.input` / `.output` rather than
 * in the GenAI message attributes: the agent run's prompt and answer, the model generation's and each model
 * step's messages and tool calls. Its memory's thread and user travel as `mastra.metadata.threadId` and
 * `resourceId`. Read here into the span's input and output (when no other convention gave one) and the trace's
 * session and user.
 */

const IO_SPANS = ["agent_run", "model_generation", "model_step"] as const

/** Mastra's tool call `{toolCallId, toolName, args | input}` in the Chat Completions form. */
const chatToolCall = (c: Json): Json => {
  const args = c.args ?? c.input ?? {}
  return {
    id: typeof c.toolCallId === "string" ? c.toolCallId : null,
    type: "function",
    function: {
      name: typeof c.toolName === "string" ? c.toolName : "",
      arguments: typeof args === "string" ? args : JSON.stringify(args)
    }
  }
}

/**
 * A Mastra result (`{text, toolCalls?, …}`): the assistant message with its tool calls when there are any, else
 * the text alone (an agent run's answer reads as the text it is).
 */
const resultValue = (v: unknown): unknown => {
  if (!isRecord(v) || typeof v.text !== "string") return v
  const calls = Array.isArray(v.toolCalls) ? v.toolCalls.filter(isRecord).map(chatToolCall) : []
  if (calls.length === 0) return v.text
  return { role: "assistant", content: v.text === "" ? null : v.text, tool_calls: calls }
}

/** A step's or a generation's messages: the list itself, or the `messages` of a request object. */
const messagesValue = (v: unknown): unknown => (isRecord(v) && Array.isArray(v.messages) ? v.messages : v)

export const readMastra = (a: Attrs, into: ConventionReading) => {
  const type = textOf(a["mastra.span.type"])
  if (type !== undefined && (IO_SPANS as ReadonlyArray<string>).includes(type)) {
    const input = a[`mastra.${type}.input`]
    const output = a[`mastra.${type}.output`]
    if (input !== undefined) set(into, "input", type === "agent_run" ? parsed(input) : messagesValue(parsed(input)))
    if (output !== undefined) set(into, "output", resultValue(parsed(output)))
  }
  set(into, "sessionId", textOf(a["mastra.metadata.threadId"]))
  set(into, "userId", textOf(a["mastra.metadata.resourceId"]))
}

/** A Mastra model step: the span around one model call that holds the call's messages and tool calls. */
export const isMastraModelStep = (a: Attrs) => textOf(a["mastra.span.type"]) === "model_step"

export const isMastraKey = (key: string) =>
  key === "mastra.metadata.threadId" ||
  key === "mastra.metadata.resourceId" ||
  IO_SPANS.some((t) => key === `mastra.${t}.input` || key === `mastra.${t}.output`)
