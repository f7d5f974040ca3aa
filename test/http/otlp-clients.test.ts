import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { context, trace as otelTrace } from "@opentelemetry/api"
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks"
import { OTLPTraceExporter as OtlpHttpExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { OTLPTraceExporter as OtlpProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base"
import { generateText, stepCountIs, tool } from "ai"
import { z } from "zod"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"

// Real exporters, no code of ours in between: the official OpenTelemetry JS SDK (protobuf and JSON, gzip on
// and off) and the Vercel AI SDK's own telemetry, sending to the running server.
let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
})
afterAll(() => server.stop())

const providerFor = (exporter: SpanExporter) =>
  new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "real-client-test" }),
    spanProcessors: [new SimpleSpanProcessor(exporter)]
  })

const traceByOtelId = async (otelTraceId: string): Promise<any> => {
  for (let i = 0; i < 50; i++) {
    const list = (await (await server.get("/api/v1/traces?limit=100")).json()) as any
    const found = list.items.find((t: any) => t.metadata?.otel?.trace_id === otelTraceId)
    if (found) return await (await server.get(`/api/v1/traces/${found.id}`)).json()
    await Bun.sleep(50)
  }
  throw new Error(`trace ${otelTraceId} never arrived`)
}

const exporters = [
  [
    "protobuf",
    "none",
    () => new OtlpProtoExporter({ url: `${server.url}/v1/traces`, headers: { "x-service-key": KEY_A } })
  ],
  [
    "protobuf",
    "gzip",
    () =>
      new OtlpProtoExporter({
        url: `${server.url}/v1/traces`,
        headers: { "x-service-key": KEY_A },
        compression: "gzip" as never
      })
  ],
  ["json", "none", () => new OtlpHttpExporter({ url: `${server.url}/v1/traces`, headers: { "x-service-key": KEY_A } })],
  [
    "json",
    "gzip",
    () =>
      new OtlpHttpExporter({
        url: `${server.url}/v1/traces`,
        headers: { "x-service-key": KEY_A },
        compression: "gzip" as never
      })
  ]
] as const

describe("OpenTelemetry JS SDK exporters", () => {
  for (const [encoding, compression, make] of exporters) {
    test(`${encoding} exporter, compression ${compression}: GenAI agent, chat and tool spans land as mapped`, async () => {
      const provider = providerFor(make())
      const tracer = provider.getTracer("genai-test")
      const root = tracer.startSpan("invoke_agent travel", {
        attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel" }
      })
      const inRoot = otelTrace.setSpan(context.active(), root)
      const chat = tracer.startSpan(
        "chat gpt-4o-mini",
        {
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 42,
            "gen_ai.usage.output_tokens": 7
          }
        },
        inRoot
      )
      chat.end()
      const toolSpan = tracer.startSpan(
        "execute_tool search_flights",
        {
          attributes: { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_flights" }
        },
        inRoot
      )
      toolSpan.end()
      root.end()
      await provider.forceFlush()
      await provider.shutdown()

      const stored = await traceByOtelId(root.spanContext().traceId)
      expect(stored.status).toBe("completed")
      expect(stored.spanCount).toBe(3)
      expect(stored.totalTokens).toBe(49)
      const llm = stored.spans.find((s: any) => s.span_type === "llm_call")
      expect(llm).toMatchObject({ model: "gpt-4o-mini", input_tokens: 42, output_tokens: 7 })
      expect(stored.spans.find((s: any) => s.span_type === "tool_call").name).toContain("search_flights")
      const agent = stored.spans.find((s: any) => s.parent_id === null)
      expect(agent.span_type).toBe("action")
      expect(llm.parent_id).toBe(agent.id)
    })
  }
})

describe("Vercel AI SDK telemetry", () => {
  test("generateText with one tool call, through a fake OpenAI-compatible server, exports a trace we map", async () => {
    let calls = 0
    const fake = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        const body = (await request.json()) as any
        calls++
        const sawToolResult = body.messages.some((m: any) => m.role === "tool")
        const message = sawToolResult
          ? { role: "assistant", content: "The weather in Lisbon is sunny." }
          : {
              role: "assistant",
              content: null,
              tool_calls: [
                { id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Lisbon"}' } }
              ]
            }
        return Response.json({
          id: `chatcmpl-${calls}`,
          object: "chat.completion",
          created: 1_787_220_000,
          model: "fake-model-1",
          choices: [{ index: 0, message, finish_reason: sawToolResult ? "stop" : "tool_calls" }],
          usage: { prompt_tokens: 20, completion_tokens: 10, total_tokens: 30 }
        })
      }
    })
    try {
      const provider = providerFor(
        new OtlpProtoExporter({ url: `${server.url}/v1/traces`, headers: { "x-service-key": KEY_A } })
      )
      const tracer = provider.getTracer("ai")
      const openai = createOpenAICompatible({
        name: "fake",
        baseURL: `http://127.0.0.1:${fake.port}/v1`,
        apiKey: "sk-test"
      })
      const outer = tracer.startSpan("agent run")
      const result = await context.with(otelTrace.setSpan(context.active(), outer), () =>
        generateText({
          model: openai("fake-model-1"),
          prompt: "What is the weather in Lisbon?",
          tools: {
            weather: tool({
              description: "Current weather of a city",
              inputSchema: z.object({ city: z.string() }),
              execute: async ({ city }) => ({ city, sky: "sunny" })
            })
          },
          stopWhen: stepCountIs(3),
          experimental_telemetry: { isEnabled: true, tracer, functionId: "weather-agent" }
        })
      )
      outer.end()
      expect(result.text).toContain("sunny")
      await provider.forceFlush()
      await provider.shutdown()

      const stored = await traceByOtelId(outer.spanContext().traceId)
      const llmCalls = stored.spans.filter((s: any) => s.span_type === "llm_call")
      expect(llmCalls.length).toBe(2)
      for (const llm of llmCalls)
        expect(llm).toMatchObject({ model: "fake-model-1", input_tokens: 20, output_tokens: 10 })
      const toolSpan = stored.spans.find((s: any) => s.span_type === "tool_call")
      expect(toolSpan.name).toContain("weather")
      expect(JSON.stringify(toolSpan.output)).toContain("sunny")
      // The outer ai.generateText span repeats its children's usage: counted once.
      expect(stored.totalTokens).toBe(60)
    } finally {
      fake.stop(true)
    }
  })
})
