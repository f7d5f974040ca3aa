import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startFakeOpenAi, type FakeOpenAi, type RecordedRequest } from "../support/FakeOpenAi.ts"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { attr, exportBody, hex, otlpSpan } from "../support/Otlp.ts"
import { span, trace } from "../support/Fixtures.ts"

/**
 * The fake model behaves like a real one with tools: it can only call `get_weather` when the request offers
 * it; without the tool it answers in text.
 */
const offersWeatherTool = (request: RecordedRequest) =>
  Array.isArray(request.body?.tools) && request.body.tools.some((t: any) => t?.function?.name === "get_weather")

let fake: FakeOpenAi
let server: TestServer
beforeAll(async () => {
  fake = startFakeOpenAi((request) =>
    offersWeatherTool(request)
      ? {
          toolCalls: [
            { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Porto"}' } }
          ]
        }
      : { content: "I cannot look that up." }
  )
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: fake.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_LLM_RETRY_BASE_MS: "10",
    TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "1000"
  })
})
afterAll(async () => {
  await server.stop()
  await fake.stop()
})

const weatherTool = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
}

/** An AI SDK doGenerate span as the SDK exports it: tools as a string array, settings, tool choice. */
const aiSdkExport = (traceId: string) => {
  const rootId = hex(8)
  const root = otlpSpan({
    traceId,
    spanId: rootId,
    name: "ai.generateText",
    startMs: 0,
    endMs: 2000,
    attributes: { "ai.operationId": "ai.generateText" }
  })
  const call = otlpSpan({
    traceId,
    parentSpanId: rootId,
    name: "ai.generateText.doGenerate",
    startMs: 10,
    endMs: 900,
    attributes: {
      "ai.operationId": "ai.generateText.doGenerate",
      "ai.model.id": "gpt-4o-mini",
      "ai.model.provider": "openai.chat",
      "ai.prompt.messages": JSON.stringify([{ role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] }]),
      "ai.prompt.toolChoice": JSON.stringify({ type: "auto" }),
      "ai.settings.temperature": 0.3,
      "ai.settings.maxOutputTokens": 256,
      "gen_ai.request.top_k": 40,
      "ai.usage.inputTokens": 20,
      "ai.usage.outputTokens": 9
    }
  })
  call.attributes.push({
    key: "ai.prompt.tools",
    value: { arrayValue: { values: [{ stringValue: JSON.stringify(weatherTool) }] } }
  } as any)
  return exportBody([root, call])
}

const traceOf = async (otelTraceId: string): Promise<any> => {
  const list = (await (await server.get("/api/v1/traces?limit=100", KEY_A)).json()) as any
  const found = list.items.find((t: any) => t.metadata?.otel?.trace_id === otelTraceId)
  return found && (await (await server.get(`/api/v1/traces/${found.id}`, KEY_A)).json())
}

describe("server replay keeps the tools", () => {
  test("an ingested AI SDK model call is stored with its tools and settings, and replay sends them again", async () => {
    const otelTraceId = hex(16)
    const ingested = await fetch(`${server.url}/v1/traces`, {
      method: "POST",
      headers: { "x-service-key": KEY_A, "content-type": "application/json" },
      body: JSON.stringify(aiSdkExport(otelTraceId))
    })
    expect(ingested.status).toBe(200)
    const recorded = await traceOf(otelTraceId)
    const llm = recorded.spans.find((s: any) => s.span_type === "llm_call")
    expect(llm.input).toMatchObject({
      messages: [{ role: "user", content: "Weather in Lisbon?" }],
      tools: [
        {
          type: "function",
          function: { name: "get_weather", description: "The weather in a city", parameters: weatherTool.inputSchema }
        }
      ],
      tool_choice: "auto",
      temperature: 0.3,
      max_tokens: 256,
      top_k: 40
    })

    const fork = (await (
      await server.post("/api/v1/forks", {
        trace_id: recorded.id,
        fork_point_span_id: llm.id,
        modified_input: "Weather in Porto?"
      })
    ).json()) as any
    const before = fake.requests.length
    const result = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(result).toMatchObject({ status: "completed", mode: "server", faithful_reexec: 1 })
    const sent = fake.requests.slice(before).map((r) => r.body)
    expect(sent.length).toBe(1)
    expect(sent[0]).toMatchObject({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "Weather in Porto?" }],
      tools: [{ type: "function", function: { name: "get_weather" } }],
      tool_choice: "auto",
      temperature: 0.3,
      max_tokens: 256
    })
    expect(sent[0].top_k).toBeUndefined()
    expect(result.fidelity_caveats).toContain(
      "request parameters sent again to the model: tools, tool_choice, temperature, max_tokens"
    )
    expect(result.fidelity_caveats).toContain(
      "request parameters recorded but not reproduced: top_k (no Chat Completions equivalent)"
    )

    // The replayed model could call the tool, as the recorded one could.
    const replayed = (await (await server.get(`/api/v1/traces/${result.result_trace_id}`)).json()) as any
    const replayedCall = replayed.spans.find((s: any) => s.span_type === "llm_call")
    expect(replayedCall.output.tool_calls[0].function.name).toBe("get_weather")
    expect(replayedCall.input.tools[0].function.name).toBe("get_weather")
  })

  test("a model call recorded without tools is replayed with its messages only, and the report says so", async () => {
    const root = span({ span_type: "action", name: "agent", started_at: "2026-01-01T00:00:00.000Z" })
    const call = span({
      parent_id: root.id,
      name: "ask",
      model: "gpt-4o-mini",
      started_at: "2026-01-01T00:00:01.000Z",
      input: [{ role: "user", content: "Weather?" }],
      output: "sunny"
    })
    const t = trace({ name: "no-tools", spans: [root, call] })
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    const fork = (await (
      await server.post("/api/v1/forks", {
        trace_id: t.id,
        fork_point_span_id: call.id,
        modified_input: "Weather in Porto?"
      })
    ).json()) as any
    const before = fake.requests.length
    const result = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(result.status).toBe("completed")
    expect(fake.requests.slice(before)[0]!.body.tools).toBeUndefined()
    expect(result.fidelity_caveats).toContain(
      "no tools or request parameters were recorded for llm_call 'ask': sent with its messages only, no tools offered"
    )
    const replayed = (await (await server.get(`/api/v1/traces/${result.result_trace_id}`)).json()) as any
    expect(replayed.spans.find((s: any) => s.name === "ask").output.content).toBe("I cannot look that up.")
  })
})
