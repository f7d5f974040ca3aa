// The Vercel AI SDK's smallest agent: generateText with one tool and two steps, telemetry on.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { generateText, stepCountIs, tool } from "ai"
import { z } from "zod"
import { MODEL, QUESTION, modelUrl, tracing, weather } from "./otel.mjs"

const provider = tracing("ai-sdk-agent")
const openai = createOpenAICompatible({ name: "openai", baseURL: modelUrl(), apiKey: "sk-fake" })
const result = await generateText({
  model: openai.chatModel(MODEL),
  prompt: QUESTION,
  tools: {
    get_weather: tool({
      description: "The weather in a city",
      inputSchema: z.object({ city: z.string() }),
      execute: async (input) => weather(input)
    })
  },
  stopWhen: stepCountIs(2),
  experimental_telemetry: { isEnabled: true, functionId: "weather-agent", metadata: { sessionId: "ai-sdk-session-1", userId: "user-1" } }
})
console.log(result.text)
await provider.shutdown()
