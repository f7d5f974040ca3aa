import { isRecord, parsed, set, textOf, type ConventionReading } from "./Reading.ts"

type Attrs = Readonly<Record<string, unknown>>

/**
 * LangGraph, as OpenInference's LangChain instrumentation exports it: every span carries the run's `metadata`
 * JSON object, where LangGraph writes the conversation (`thread_id`) and, on a span inside the graph, the node it
 * runs in (`langgraph_node`, `langgraph_step`, `langgraph_triggers`, `checkpoint_ns`). The graph's own span (a
 * LangGraph run outside any node) is the agent, known by the graph's name (`createReactAgent({name})`,
 * `compile({name})`).
 */

const metadataOf = (a: Attrs): Record<string, unknown> | undefined => {
  const m = parsed(a["metadata"])
  return isRecord(m) ? m : undefined
}

export const readLangGraph = (a: Attrs, into: ConventionReading) => {
  const m = metadataOf(a)
  if (m === undefined) return
  set(into, "sessionId", textOf(m.thread_id))
  const node = textOf(m.langgraph_node)
  if (node === undefined) return
  const details: Record<string, unknown> = { node }
  if (typeof m.langgraph_step === "number") details.step = m.langgraph_step
  if (Array.isArray(m.langgraph_triggers)) details.triggers = m.langgraph_triggers
  const ns = textOf(m.checkpoint_ns) ?? textOf(m.langgraph_checkpoint_ns)
  if (ns !== undefined) details.checkpoint_ns = ns
  into.spanDetails = { ...into.spanDetails, langgraph: details }
}

/**
 * The prebuilt agent's `prompt` runnable inside a graph node: it only puts the agent's instructions before the
 * messages (a prompt template by another name), so it is plumbing.
 */
export const isLangGraphPrompt = (name: string, a: Attrs): boolean =>
  name === "prompt" && textOf(metadataOf(a)?.langgraph_node) !== undefined

/** Whether this OpenInference span is a LangGraph graph run itself rather than a step inside one of its nodes. */
export const isLangGraphRun = (a: Attrs): boolean => {
  if (textOf(a["openinference.span.kind"])?.toUpperCase() !== "CHAIN") return false
  const m = metadataOf(a)
  return m !== undefined && m.ls_integration === "langgraph" && m.langgraph_node === undefined
}
