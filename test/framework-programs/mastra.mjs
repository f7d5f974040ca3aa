// Mastra's smallest agent (one tool), exported by Mastra's own OpenTelemetry exporter.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { Mastra } from "@mastra/core"
import { Agent } from "@mastra/core/agent"
import { createTool } from "@mastra/core/tools"
import { Observability } from "@mastra/observability"
import { OtelExporter } from "@mastra/otel-exporter"
import { z } from "zod"
import { MODEL, QUESTION, modelUrl, otlpHeaders, otlpUrl, weather } from "./otel.mjs"

const getWeather = createTool({
  id: "get_weather",
  description: "The weather in a city",
  inputSchema: z.object({ city: z.string() }),
  execute: async (input) => weather(input)
})
const openai = createOpenAICompatible({ name: "openai", baseURL: modelUrl(), apiKey: "sk-fake" })
const weatherAgent = new Agent({
  id: "weather-agent",
  name: "Weather agent",
  instructions: "Answer with the weather.",
  model: openai.chatModel(MODEL),
  tools: { get_weather: getWeather }
})
const mastra = new Mastra({
  agents: { weatherAgent },
  observability: new Observability({
    configs: {
      otel: {
        serviceName: "mastra-agent",
        exporters: [new OtelExporter({ provider: { custom: { endpoint: otlpUrl(), protocol: "http/json", headers: otlpHeaders() } } })]
      }
    }
  })
})
const result = await mastra.getAgent("weatherAgent").generate(QUESTION, {
  maxSteps: 2,
  // What Mastra's memory writes on its spans (the user and the conversation), without a storage adapter.
  tracingOptions: { metadata: { resourceId: "user-1", threadId: "mastra-thread-1" } }
})
console.log(result.text)
await mastra.shutdown()
