import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { requestParameters, withRequestParameters } from "#src/domain/genai/conventions/RequestParameters"
import { recordedRequest } from "../../src/domain/ReplayPlan.ts"

const schema = { type: "object", properties: { city: { type: "string" } } }
const chatTool = { type: "function", function: { name: "get_weather", description: "Weather", parameters: schema } }

describe("request parameters of a model call, per convention", () => {
  test("OTel GenAI: gen_ai.tool.definitions (flat form) and gen_ai.request.*", () => {
    expect(requestParameters({
      "gen_ai.tool.definitions": JSON.stringify([{ type: "function", name: "get_weather", description: "Weather", parameters: schema }]),
      "gen_ai.request.temperature": 0.5,
      "gen_ai.request.max_tokens": 100,
      "gen_ai.request.top_p": 0.9,
      "gen_ai.request.stop_sequences": ["END"],
      "gen_ai.request.seed": 7,
      "gen_ai.output.type": "json"
    })).toEqual({
      tools: [chatTool], temperature: 0.5, max_tokens: 100, top_p: 0.9, stop: ["END"], seed: 7,
      response_format: { type: "json_object" }
    })
  })

  test("OpenInference: llm.tools.<i>.tool.json_schema and llm.invocation_parameters", () => {
    expect(requestParameters({
      "llm.tools.1.tool.json_schema": JSON.stringify({ type: "function", function: { name: "second" } }),
      "llm.tools.0.tool.json_schema": JSON.stringify(chatTool),
      "llm.invocation_parameters": JSON.stringify({ model: "gpt-4o", temperature: 0, tool_choice: "required", parallel_tool_calls: false })
    })).toEqual({
      tools: [chatTool, { type: "function", function: { name: "second" } }],
      temperature: 0, tool_choice: "required", parallel_tool_calls: false
    })
  })

  test("AI SDK: ai.prompt.tools (inputSchema), ai.prompt.toolChoice naming a tool, ai.settings.*", () => {
    expect(requestParameters({
      "ai.prompt.tools": [JSON.stringify({ type: "function", name: "get_weather", description: "Weather", inputSchema: schema })],
      "ai.prompt.toolChoice": JSON.stringify({ type: "tool", toolName: "get_weather" }),
      "ai.settings.maxOutputTokens": 64,
      "ai.settings.topK": 3
    })).toEqual({
      tools: [chatTool], tool_choice: { type: "function", function: { name: "get_weather" } }, max_tokens: 64, top_k: 3
    })
  })

  test("Langfuse model parameters and LangSmith ls_* metadata", () => {
    expect(requestParameters({ "langfuse.observation.model.parameters": "{\"temperature\":\"0.7\",\"max_tokens\":\"50\"}" }))
      .toEqual({ temperature: 0.7, max_tokens: 50 })
    expect(requestParameters({ "langsmith.metadata.ls_temperature": 0.1, "langsmith.metadata.ls_max_tokens": 12 }))
      .toEqual({ temperature: 0.1, max_tokens: 12 })
  })

  test("nothing recorded, nothing added; unreadable tools are left out", () => {
    expect(requestParameters({ "gen_ai.request.model": "gpt-4o" })).toBeUndefined()
    expect(requestParameters({ "gen_ai.tool.definitions": "[{\"description\":\"no name\"}]" })).toBeUndefined()
    const messages = [{ role: "user", content: "hi" }]
    expect(withRequestParameters(messages, undefined)).toBe(messages)
  })

  test("property: what ingestion stores, replay reads back (every replayable parameter, the messages untouched)", () => {
    const value = fc.oneof(fc.integer({ min: 0, max: 4096 }), fc.double({ min: 0, max: 2, noNaN: true }))
    fc.assert(fc.property(
      fc.array(fc.record({ role: fc.constantFrom("user", "system"), content: fc.string() }), { minLength: 1, maxLength: 4 }),
      fc.record({ temperature: value, max_tokens: fc.integer({ min: 1, max: 4096 }), top_p: value }, { requiredKeys: [] }),
      (messages, settings) => {
        const request = requestParameters(Object.fromEntries(Object.entries(settings).map(([k, v]) => [`gen_ai.request.${k}`, v])))
        const stored = withRequestParameters(messages, request)
        const read = recordedRequest(stored)
        expect(read.parameters).toEqual(settings)
        if (request !== undefined) expect((stored as any).messages).toEqual(messages)
      }
    ))
  })
})
