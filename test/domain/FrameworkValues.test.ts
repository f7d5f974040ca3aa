import { describe, expect, test } from "bun:test"
import { mapSpan } from "#src/domain/genai/MapSpan"
import { accountSpanIds } from "#layers/ingest/OtlpIds"
import * as F from "../fixtures/otlp/GenAiFixtures.ts"

const IDS = accountSpanIds(F.ACME)
const mapped = (attributes: Record<string, unknown>, name = "span") => {
  const m = mapSpan(IDS, F.otlpSpan({
    traceId: "0123456789abcdef0123456789abcdef", spanId: "0011223344556677", parentSpanId: "8899aabbccddeeff",
    name, kind: 1, startTimeUnixNano: "1787220000000000000", endTimeUnixNano: "1787220001000000000", attributes
  }))
  if (m === undefined) throw new Error("span was skipped")
  return m.span
}

const lc = (cls: string, kwargs: Record<string, unknown>) => ({ lc: 1, type: "constructor", id: ["langchain_core", "messages", cls], kwargs })

describe("framework wrappers made plain", () => {
  test("LangGraph chain (OpenInference): serialized LangChain messages in input.value / output.value become chat messages", () => {
    const span = mapped({
      "openinference.span.kind": "CHAIN",
      "input.value": JSON.stringify({ messages: [lc("HumanMessage", { content: "Weather in Porto?" })] }),
      "input.mime_type": "application/json",
      "output.value": JSON.stringify({
        messages: [
          lc("HumanMessage", { content: "Weather in Porto?" }),
          lc("AIMessage", { content: "", tool_calls: [{ id: "c1", name: "get_weather", args: { city: "Porto" } }] }),
          lc("ToolMessage", { content: "sunny", tool_call_id: "c1", name: "get_weather" })
        ]
      }),
      "output.mime_type": "application/json"
    }, "agent")
    expect(span.input).toEqual({ messages: [{ role: "user", content: "Weather in Porto?" }] })
    expect(span.output).toEqual({
      messages: [
        { role: "user", content: "Weather in Porto?" },
        { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Porto\"}" } }] },
        { role: "tool", content: "sunny", name: "get_weather", tool_call_id: "c1" }
      ]
    })
  })

  test("AI SDK tool span: the {type, value} output wrapper is unwrapped; other outputs are kept", () => {
    const tool = (result: string) => mapped({ "ai.operationId": "ai.toolCall", "ai.toolCall.name": "get_weather", "ai.toolCall.result": result }, "ai.toolCall")
    expect(tool(JSON.stringify({ type: "json", value: { temp: 21 } })).output).toEqual({ temp: 21 })
    expect(tool(JSON.stringify({ type: "text", value: "sunny" })).output).toBe("sunny")
    expect(tool(JSON.stringify({ type: "text", value: "sunny", extra: 1 })).output).toEqual({ type: "text", value: "sunny", extra: 1 })
    expect(tool(JSON.stringify({ temp: 21 })).output).toEqual({ temp: 21 })
  })

  test("AI SDK model call: a tool-result part's wrapped output becomes the tool message's content", () => {
    const span = mapped({
      "ai.operationId": "ai.generateText.doGenerate",
      "ai.model.id": "gpt-4o-mini",
      "ai.prompt.messages": JSON.stringify([
        { role: "tool", content: [{ type: "tool-result", toolCallId: "c1", toolName: "get_weather", output: { type: "text", value: "sunny" } }] }
      ])
    }, "ai.generateText.doGenerate")
    expect(span.input).toEqual([{ role: "tool", tool_call_id: "c1", content: "sunny" }])
  })
})

describe("framework plumbing is kept but flagged", () => {
  test("LangGraph __start__ and LangChain runnables are flagged; the agent's own chain steps and model calls are not", () => {
    const chain = { "openinference.span.kind": "CHAIN" }
    expect(mapped(chain, "__start__").metadata.framework_plumbing).toBe(true)
    expect(mapped(chain, "RunnableSequence").metadata.framework_plumbing).toBe(true)
    expect(mapped(chain, "ChatPromptTemplate").metadata.framework_plumbing).toBe(true)
    expect(mapped(chain, "agent").metadata.framework_plumbing).toBeUndefined()
    expect(mapped({ "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o" }, "RunnableSequence").metadata.framework_plumbing).toBeUndefined()
  })
})

describe("finish reasons kept", () => {
  test("OpenInference llm.finish_reason lands on the output message unless it has its own", () => {
    const llm = (extra: Record<string, unknown>) => mapped({
      "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
      "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "done", ...extra
    }, "response")
    expect(llm({ "llm.finish_reason": "stop" }).output).toEqual({ role: "assistant", content: "done", finish_reason: "stop" })
    expect(llm({}).output).toEqual({ role: "assistant", content: "done" })
  })
})
