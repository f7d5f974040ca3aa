// The OpenAI Agents SDK's smallest agent (Responses API, one tool), traced by OpenInference's processor; the run
// belongs to a conversation through its groupId.
import { OpenAIAgentsInstrumentation } from "@arizeai/openinference-instrumentation-openai-agents"
import * as agents from "@openai/agents"
import OpenAI from "openai"
import { z } from "zod"
import { MODEL, QUESTION, modelUrl, tracing, weather } from "./otel.mjs"

const provider = tracing("openai-agents")
new OpenAIAgentsInstrumentation({ tracerProvider: provider }).manuallyInstrument(agents)
agents.setDefaultOpenAIClient(new OpenAI({ apiKey: "sk-fake", baseURL: modelUrl() }))
agents.setOpenAIAPI("responses")

const getWeather = agents.tool({
  name: "get_weather",
  description: "The weather in a city",
  parameters: z.object({ city: z.string() }),
  execute: async (input) => weather(input)
})
const agent = new agents.Agent({ name: "Weather agent", instructions: "Answer with the weather.", model: MODEL, tools: [getWeather] })
const result = await agents.run(agent, QUESTION, { groupId: "openai-agents-conversation-1" })
console.log(result.finalOutput)
await agents.getGlobalTraceProvider().forceFlush()
await provider.shutdown()
