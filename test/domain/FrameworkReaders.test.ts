import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { unwrapToolMessage, withPlainTextContent } from "#src/domain/genai/conventions/FrameworkValues"
import { isLangGraphPrompt, isLangGraphRun, readLangGraph } from "#src/domain/genai/conventions/LangGraph"
import { readMastra } from "#src/domain/genai/conventions/Mastra"
import type { ConventionReading } from "#src/domain/genai/conventions/Reading"

const read = (reader: (a: Record<string, unknown>, into: ConventionReading) => void, a: Record<string, unknown>) => {
  const into: ConventionReading = {}
  reader(a, into)
  return into
}

const text = fc.string({ maxLength: 30 })
const toolName = fc.stringMatching(/^[a-z_]{1,12}$/)

describe("Responses-API and LangChain tool values made plain", () => {
  test("an output message of text parts only has their text as its content; any other part leaves it as it is", () => {
    fc.assert(
      fc.property(fc.array(text, { minLength: 1, maxLength: 4 }), fc.boolean(), (texts, withImage) => {
        const parts: Array<unknown> = texts.map((t) => ({ type: "text", text: t }))
        if (withImage) parts.push({ type: "image_url", image_url: { url: "https://x/y.png" } })
        const message = { role: "assistant", content: parts, finish_reason: "stop" }
        expect(withPlainTextContent(message)).toEqual(withImage ? message : { ...message, content: texts.join("") })
      })
    )
    expect(withPlainTextContent({ role: "assistant", content: [] })).toEqual({ role: "assistant", content: [] })
    expect(withPlainTextContent([{ type: "text", text: "a list, not a message" }])).toEqual([
      { type: "text", text: "a list, not a message" }
    ])
  })

  test("a LangChain tool's {output: ToolMessage} is the message's content; other values stay", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (content) => {
        expect(unwrapToolMessage({ output: { role: "tool", content, tool_call_id: "c1" } })).toEqual(content)
        const other = { output: { role: "assistant", content } }
        expect(unwrapToolMessage(other)).toBe(other)
        const extra = { output: { role: "tool", content }, status: "ok" }
        expect(unwrapToolMessage(extra)).toBe(extra)
      })
    )
  })
})

describe("Mastra", () => {
  test("a model step's output: its tool calls in the Chat Completions form, the text alone when there are none", () => {
    fc.assert(
      fc.property(
        text,
        fc.array(fc.record({ id: fc.uuid(), name: toolName, args: fc.dictionary(toolName, fc.integer()) }), {
          maxLength: 3
        }),
        (answer, calls) => {
          const r = read(readMastra, {
            "mastra.span.type": "model_step",
            "mastra.model_step.output": JSON.stringify({
              text: answer,
              toolCalls: calls.map((c) => ({ toolCallId: c.id, toolName: c.name, args: c.args }))
            })
          })
          if (calls.length === 0) expect(r.output).toBe(answer)
          else {
            expect(r.output).toEqual({
              role: "assistant",
              content: answer === "" ? null : answer,
              tool_calls: calls.map((c) => ({
                id: c.id,
                type: "function",
                function: { name: c.name, arguments: JSON.stringify(c.args) }
              }))
            })
          }
        }
      )
    )
  })

  test("an agent run's prompt and answer, a generation's messages, the thread and the user", () => {
    expect(
      read(readMastra, {
        "mastra.span.type": "agent_run",
        "mastra.agent_run.input": "Weather?",
        "mastra.agent_run.output": JSON.stringify({ text: "Sunny.", files: [] }),
        "mastra.metadata.threadId": "t-1",
        "mastra.metadata.resourceId": "u-1"
      })
    ).toEqual({ input: "Weather?", output: "Sunny.", sessionId: "t-1", userId: "u-1" })
    expect(
      read(readMastra, {
        "mastra.span.type": "model_generation",
        "mastra.model_generation.input": JSON.stringify({ messages: [{ role: "user", content: "Weather?" }] })
      })
    ).toEqual({ input: [{ role: "user", content: "Weather?" }] })
    // Another span type's attributes of the same form are not read as its input.
    expect(read(readMastra, { "mastra.span.type": "tool_call", "mastra.agent_run.input": "x" })).toEqual({})
  })
})

describe("LangGraph (OpenInference metadata)", () => {
  test("the thread is the session; a span inside a node keeps the node; only the graph's own run is the agent", () => {
    const graph = {
      "openinference.span.kind": "CHAIN",
      metadata: JSON.stringify({ ls_integration: "langgraph", thread_id: "th-1" })
    }
    const node = {
      "openinference.span.kind": "CHAIN",
      metadata: JSON.stringify({
        ls_integration: "langgraph",
        thread_id: "th-1",
        langgraph_node: "tools",
        langgraph_step: 2,
        langgraph_triggers: ["branch:to:tools"],
        checkpoint_ns: "tools:1"
      })
    }
    expect(read(readLangGraph, graph)).toEqual({ sessionId: "th-1" })
    expect(read(readLangGraph, node)).toEqual({
      sessionId: "th-1",
      spanDetails: { langgraph: { node: "tools", step: 2, triggers: ["branch:to:tools"], checkpoint_ns: "tools:1" } }
    })
    expect([isLangGraphRun(graph), isLangGraphRun(node)]).toEqual([true, false])
    expect(isLangGraphRun({ ...graph, "openinference.span.kind": "LLM" })).toBe(false)
    // The prebuilt agent's prompt runnable inside a node is plumbing; a span merely named "prompt" elsewhere is not.
    expect([
      isLangGraphPrompt("prompt", node),
      isLangGraphPrompt("prompt", graph),
      isLangGraphPrompt("agent", node)
    ]).toEqual([true, false, false])
    expect(isLangGraphRun({ "openinference.span.kind": "CHAIN", metadata: "not json" })).toBe(false)
  })
})
