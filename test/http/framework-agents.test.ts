import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"
import { traceByOtelId } from "../support/SdkPrograms.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
})
afterAll(() => server.stop())

const ingest = async (body: unknown) => {
  const response = await fetch(`${server.url}/v1/traces`, {
    method: "POST",
    headers: { "x-service-key": KEY_A, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  expect(response.status).toBe(200)
}

const traceOf = (otelTraceId: string) => traceByOtelId(server, otelTraceId)

describe("agent identity from framework attributes, handed down to descendants", () => {
  test("OpenAI Agents SDK (OpenInference): the AGENT span's graph.node.id names the agent of its model and tool calls", async () => {
    const traceId = hex(16)
    const agentId = hex(8)
    await ingest(
      exportBody([
        otlpSpan({
          traceId,
          spanId: agentId,
          name: "Weather agent",
          startMs: 0,
          endMs: 3000,
          attributes: { "openinference.span.kind": "AGENT", "graph.node.id": "Weather agent" }
        }),
        otlpSpan({
          traceId,
          parentSpanId: agentId,
          name: "response",
          startMs: 10,
          endMs: 900,
          attributes: {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": 20,
            "llm.token_count.completion": 4
          }
        }),
        otlpSpan({
          traceId,
          parentSpanId: agentId,
          name: "get_weather",
          startMs: 1000,
          endMs: 1100,
          attributes: { "openinference.span.kind": "TOOL", "tool.name": "get_weather" }
        })
      ])
    )
    const trace = await traceOf(traceId)
    expect(trace.spans.map((s: any) => [s.span_type, s.agent_id])).toEqual([
      ["action", "Weather agent"],
      ["llm_call", "Weather agent"],
      ["tool_call", "Weather agent"]
    ])
  })

  test("AI SDK: ai.telemetry.functionId is the agent of the generation and of its provider and tool calls", async () => {
    const traceId = hex(16)
    const rootId = hex(8)
    const common = { "ai.telemetry.functionId": "trip-planner" }
    await ingest(
      exportBody([
        otlpSpan({
          traceId,
          spanId: rootId,
          name: "ai.generateText",
          startMs: 0,
          endMs: 3000,
          attributes: { ...common, "ai.operationId": "ai.generateText" }
        }),
        otlpSpan({
          traceId,
          parentSpanId: rootId,
          name: "ai.generateText.doGenerate",
          startMs: 10,
          endMs: 900,
          attributes: { ...common, "ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "gpt-4o-mini" }
        }),
        otlpSpan({
          traceId,
          parentSpanId: rootId,
          name: "ai.toolCall",
          startMs: 1000,
          endMs: 1100,
          attributes: { ...common, "ai.operationId": "ai.toolCall", "ai.toolCall.name": "get_weather" }
        })
      ])
    )
    const trace = await traceOf(traceId)
    expect(trace.spans.map((s: any) => s.agent_id)).toEqual(["trip-planner", "trip-planner", "trip-planner"])
    expect(trace.spans[0].metadata.agent).toMatchObject({ is_agent_span: true, own_id: "trip-planner" })
  })
})
