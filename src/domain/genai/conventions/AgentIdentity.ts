/**
 * Agent identity for frameworks that do not write `gen_ai.agent.*`: the name an agent span is known by, and the
 * spans that are agents. Finalize hands an agent span's id down to its descendants, so the session graph shows
 * these frameworks' agents as it shows the GenAI convention's.
 */

import { isLangGraphRun } from "./LangGraph.ts"

type Attrs = Readonly<Record<string, unknown>>

const text = (v: unknown): string | undefined => {
  if (typeof v !== "string") return undefined
  const t = v.trim()
  return t === "" ? undefined : t
}

/** AI SDK calls that are a whole generation (not the provider call inside it). */
const AI_SDK_RUNS = /^ai\.(generateText|streamText|generateObject|streamObject)$/

/**
 * Spans that define an agent beyond the GenAI operations: an AI SDK generation named by
 * `ai.telemetry.functionId` (its agent), a Mastra agent run (`mastra.span.type` = `agent_run`) and a LangGraph
 * graph run (OpenInference).
 */
export const isFrameworkAgentSpan = (a: Attrs, aiOperation: string | undefined): boolean =>
  (aiOperation !== undefined && AI_SDK_RUNS.test(aiOperation) && text(a["ai.telemetry.functionId"]) !== undefined) ||
  text(a["mastra.span.type"]) === "agent_run" || isLangGraphRun(a)

/**
 * The agent id of a span from framework attributes: `ai.telemetry.functionId` (AI SDK, on every span of the
 * call), Mastra's agent id, and, for a span already known to be an agent (OpenInference AGENT, a Langfuse agent
 * observation) that names no id, the OpenInference `graph.node.id` (the OpenAI Agents SDK writes the agent's
 * name there). Not the span name, but for a LangGraph graph run, known only by its graph's name (the span's);
 * another agent span with no name of its own inherits the identity above it.
 */
export const frameworkAgentId = (a: Attrs, agentSpan: boolean, spanName: string): string | undefined =>
  text(a["ai.telemetry.functionId"]) ??
  text(a["mastra.agent.id"]) ?? text(a["mastra.agent_run.agent_id"]) ??
  (agentSpan ? text(a["graph.node.id"]) : undefined) ??
  (isLangGraphRun(a) ? text(spanName) : undefined)
