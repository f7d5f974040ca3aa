/**
 * The 30-step tool-using agent of the storage benchmarks (test/bench/storage.ts, test/bench/search-footprint.ts): a
 * ~2 KB system prompt, 8 tool schemas, each step a model call carrying the whole history so far and a tool call
 * with a ~1.5 KB result. BENCH_STEPS (30) steps a run.
 */
import { filler, numberEnv } from "./Harness.ts"

export const STEPS = numberEnv("BENCH_STEPS", 30)

export const SYSTEM = `You are a careful research agent. ${filler(2000)}`
export const TOOLS = Array.from({ length: 8 }, (_, i) => ({
  type: "function",
  function: {
    name: `tool_${i}`,
    description: filler(200),
    parameters: {
      type: "object",
      properties: { query: { type: "string", description: filler(80) }, limit: { type: "integer" } },
      required: ["query"]
    }
  }
}))

interface Step {
  readonly messages: ReadonlyArray<unknown>
  readonly answer: { role: "assistant"; content: string; tool_calls: ReadonlyArray<unknown> }
  readonly call: { id: string; name: string; arguments: string }
  readonly result: string
}

/** One run of the agent: each step's request history, its answer (a tool call) and the tool's result. */
export const agentRun = (run: number): ReadonlyArray<Step> => {
  const history: Array<unknown> = [
    { role: "system", content: SYSTEM },
    { role: "user", content: `Task ${run}: ${filler(300)}` }
  ]
  const steps: Array<Step> = []
  for (let i = 0; i < STEPS; i++) {
    const call = {
      id: `call_${run}_${i}`,
      name: `tool_${i % 8}`,
      arguments: JSON.stringify({ query: `${run} ${filler(60)}`, limit: 5 })
    }
    const answer = {
      role: "assistant" as const,
      content: `Step ${i} of run ${run}: ${filler(150)}`,
      tool_calls: [{ id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } }]
    }
    const result = `Result ${run}.${i}: ${filler(1500)}`
    steps.push({ messages: [...history], answer, call, result })
    history.push(answer, { role: "tool", tool_call_id: call.id, content: result })
  }
  return steps
}

export const iso = (base: number, ms: number) => new Date(base + ms).toISOString()

/** The run as a CreateTraceRequest: a root span, then a model call and a tool call per step. */
export const restBody = (run: number, startMs = Date.now() - 3_600_000) => {
  const root = crypto.randomUUID()
  const spans: Array<Record<string, unknown>> = [
    {
      id: root,
      parent_id: null,
      span_type: "action",
      name: "agent",
      started_at: iso(startMs, 0),
      ended_at: iso(startMs, STEPS * 2000)
    }
  ]
  agentRun(run).forEach((step, i) => {
    spans.push(
      {
        id: crypto.randomUUID(),
        parent_id: root,
        span_type: "llm_call",
        name: "chat gpt-4o",
        model: "gpt-4o",
        input: { model: "gpt-4o", messages: step.messages, tools: TOOLS },
        output: step.answer,
        input_tokens: 1000 + i * 500,
        output_tokens: 80,
        cost: 0.001,
        started_at: iso(startMs, i * 2000),
        ended_at: iso(startMs, i * 2000 + 1500)
      },
      {
        id: crypto.randomUUID(),
        parent_id: root,
        span_type: "tool_call",
        name: step.call.name,
        input: JSON.parse(step.call.arguments),
        output: step.result,
        started_at: iso(startMs, i * 2000 + 1500),
        ended_at: iso(startMs, i * 2000 + 1900)
      }
    )
  })
  return {
    id: crypto.randomUUID(),
    name: `run ${run}`,
    status: "completed",
    started_at: iso(startMs, 0),
    ended_at: iso(startMs, STEPS * 2000),
    spans
  }
}
