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

const hex = (bytes: number) =>
  [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("")
const attr = (key: string, value: string | number) => ({
  key,
  value: typeof value === "string" ? { stringValue: value } : { intValue: String(value) }
})
const nanos = (ms: number) => String(BigInt(ms) * 1_000_000n)

/** The run as an OTLP/JSON export of GenAI chat spans (the OpenTelemetry GenAI conventions' message attributes). */
export const otlpBody = (run: number) => {
  const traceId = hex(16)
  const base = Date.now() - 3_600_000
  const root = hex(8)
  const parts = (m: any) =>
    m.role === "tool"
      ? [{ type: "tool_call_response", id: m.tool_call_id, response: m.content }]
      : [
          { type: "text", content: m.content },
          ...(m.tool_calls ?? []).map((c: any) => ({
            type: "tool_call",
            id: c.id,
            name: c.function.name,
            arguments: c.function.arguments
          }))
        ]
  const spans: Array<unknown> = [
    {
      traceId,
      spanId: root,
      name: "invoke_agent",
      kind: 1,
      startTimeUnixNano: nanos(base),
      endTimeUnixNano: nanos(base + STEPS * 2000),
      attributes: [attr("gen_ai.operation.name", "invoke_agent")]
    }
  ]
  agentRun(run).forEach((step, i) => {
    const [, ...rest] = step.messages as Array<any>
    spans.push(
      {
        traceId,
        spanId: hex(8),
        parentSpanId: root,
        name: "chat gpt-4o",
        kind: 3,
        startTimeUnixNano: nanos(base + i * 2000),
        endTimeUnixNano: nanos(base + i * 2000 + 1500),
        attributes: [
          attr("gen_ai.operation.name", "chat"),
          attr("gen_ai.request.model", "gpt-4o"),
          attr("gen_ai.usage.input_tokens", 1000 + i * 500),
          attr("gen_ai.usage.output_tokens", 80),
          attr("gen_ai.system_instructions", JSON.stringify([{ type: "text", content: SYSTEM }])),
          attr("gen_ai.tool.definitions", JSON.stringify(TOOLS)),
          attr("gen_ai.input.messages", JSON.stringify(rest.map((m) => ({ role: m.role, parts: parts(m) })))),
          attr(
            "gen_ai.output.messages",
            JSON.stringify([{ role: "assistant", parts: parts(step.answer), finish_reason: "tool_call" }])
          )
        ]
      },
      {
        traceId,
        spanId: hex(8),
        parentSpanId: root,
        name: `execute_tool ${step.call.name}`,
        kind: 1,
        startTimeUnixNano: nanos(base + i * 2000 + 1500),
        endTimeUnixNano: nanos(base + i * 2000 + 1900),
        attributes: [
          attr("gen_ai.operation.name", "execute_tool"),
          attr("gen_ai.tool.name", step.call.name),
          attr("gen_ai.tool.call.arguments", step.call.arguments),
          attr("gen_ai.tool.call.result", step.result)
        ]
      }
    )
  })
  return {
    resourceSpans: [
      {
        resource: { attributes: [attr("service.name", "bench-agent")] },
        scopeSpans: [{ scope: { name: "bench" }, spans }]
      }
    ]
  }
}
