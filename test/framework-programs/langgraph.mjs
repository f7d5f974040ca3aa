// LangGraph.js's smallest agent (the prebuilt ReAct agent, one tool), traced by OpenInference's LangChain
// instrumentation.
import { LangChainInstrumentation } from "@arizeai/openinference-instrumentation-langchain"
import * as CallbackManager from "@langchain/core/callbacks/manager"
import { tool } from "@langchain/core/tools"
import { createReactAgent } from "@langchain/langgraph/prebuilt"
import { ChatOpenAI } from "@langchain/openai"
import { z } from "zod"
import { MODEL, QUESTION, modelUrl, tracing, weather } from "./otel.mjs"

const provider = tracing("langgraph-agent")
new LangChainInstrumentation({ tracerProvider: provider }).manuallyInstrument(CallbackManager)

const getWeather = tool(async (input) => weather(input), {
  name: "get_weather",
  description: "The weather in a city",
  schema: z.object({ city: z.string() })
})
const llm = new ChatOpenAI({ model: MODEL, apiKey: "sk-fake", configuration: { baseURL: modelUrl() }, temperature: 0.2 })
const agent = createReactAgent({ llm, tools: [getWeather], name: "weather_agent" })
const result = await agent.invoke(
  { messages: [{ role: "user", content: QUESTION }] },
  { configurable: { thread_id: "langgraph-thread-1" } }
)
console.log(result.messages.at(-1).content)
await provider.shutdown()
