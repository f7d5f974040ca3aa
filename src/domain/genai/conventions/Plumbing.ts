/**
 * Framework plumbing: spans a framework emits for its own wiring (LangGraph's `__start__` node, LangChain's
 * runnables and prompt templates, Mastra's internal operations) rather than for a step of the agent. They are
 * kept, and flagged `metadata.framework_plumbing: true` so a view can fold them away.
 */

import { isLangGraphPrompt } from "./LangGraph.ts"

type Attrs = Readonly<Record<string, unknown>>

const LANGCHAIN_PLUMBING = new Set([
  "__start__", "__end__", "RunnableSequence", "RunnableLambda", "RunnableParallel", "RunnableMap", "RunnablePassthrough",
  "RunnableAssign", "RunnableBranch", "RunnableWithFallbacks", "ChannelWrite", "ChannelRead", "ChatPromptTemplate",
  "PromptTemplate", "StrOutputParser", "JsonOutputParser"
])

/** Whether a span of this name and attributes is framework plumbing; model, tool and agent spans never are. */
export const isFrameworkPlumbing = (name: string, a: Attrs, modelToolOrAgent: boolean): boolean => {
  if (modelToolOrAgent) return false
  if (LANGCHAIN_PLUMBING.has(name) || name.startsWith("ChannelWrite<") || name.startsWith("Branch<")) return true
  if (isLangGraphPrompt(name, a)) return true
  const mastra = a["mastra.span.type"]
  return typeof mastra === "string" && mastra !== "" && mastra !== "agent_run" && mastra !== "model_generation" &&
    mastra !== "model_step" && mastra !== "tool_call" && mastra !== "workflow_run" && mastra !== "workflow_step"
}
