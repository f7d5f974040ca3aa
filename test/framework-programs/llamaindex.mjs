// LlamaIndex.TS's smallest agent (one tool), traced by OpenLLMetry (Traceloop's SDK).
import * as traceloop from "@traceloop/node-server-sdk"
import * as llamaindex from "llamaindex"
import * as llamaIndexOpenAI from "@llamaindex/openai"
import { z } from "zod"
import { MODEL, QUESTION, modelUrl, otlpHeaders, otlpUrl, weather } from "./otel.mjs"

traceloop.initialize({
  appName: "llamaindex-agent",
  baseUrl: otlpUrl(),
  headers: otlpHeaders(),
  disableBatch: true,
  silenceInitializationMessage: true,
  traceloopSyncEnabled: false,
  instrumentModules: { llamaIndex: llamaindex, llamaIndexOpenAI }
})
const getWeather = llamaindex.tool({
  name: "get_weather",
  description: "The weather in a city",
  parameters: z.object({ city: z.string() }),
  execute: async (input) => weather(input)
})
const weatherAgent = new llamaIndexOpenAI.OpenAIAgent({ tools: [getWeather], llm: llamaIndexOpenAI.openai({ model: MODEL, apiKey: "sk-fake", baseURL: modelUrl() }) })
const result = await weatherAgent.chat({ message: QUESTION })
console.log(result.message.content)
await traceloop.forceFlush()
