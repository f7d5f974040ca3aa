import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { FINAL_ANSWER, WEATHER_TOOL } from "../support/FakeAgentModel.ts"
import { startFakeOpenAi, type FakeOpenAi } from "../support/FakeOpenAi.ts"
import { fixturePath, type FrameworkName } from "../support/Frameworks.ts"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"

/**
 * One real export per framework (test/fixtures/otlp/frameworks/, recorded once by record-framework.ts from the
 * framework's smallest agent: one tool, two model turns) sent to the service as it was recorded, byte for byte,
 * and what Tapedeck made of it read back through the API.
 */

interface Recorded {
  readonly path: string
  readonly contentType: string
  readonly body: any
}

let server: TestServer
let replayModel: FakeOpenAi
beforeAll(async () => {
  // Server replay's model: like a real one, it can call get_weather only when the request offers it.
  replayModel = startFakeOpenAi((request) =>
    Array.isArray(request.body?.tools) && request.body.tools.some((t: any) => t?.function?.name === WEATHER_TOOL)
      ? {
          toolCalls: [
            { id: "call_r", type: "function", function: { name: WEATHER_TOOL, arguments: '{"city":"Porto"}' } }
          ]
        }
      : { content: "I cannot look that up." }
  )
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: replayModel.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_LLM_RETRY_BASE_MS: "10",
    TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "1000"
  })
}, 60_000)
afterAll(async () => {
  await server.stop()
  await replayModel.stop()
})

const TOOL_RESULT = "sunny, 21°C in Lisbon"

/** Sends every recorded request; returns the answers to the non-trace ones (Mastra also exports logs). */
const replayExport = async (name: FrameworkName) => {
  const recorded = JSON.parse(readFileSync(fixturePath(name), "utf8")) as { requests: Array<Recorded> }
  const others: Array<Response> = []
  for (const r of recorded.requests) {
    const body = r.body.base64 === undefined ? JSON.stringify(r.body) : Buffer.from(r.body.base64, "base64")
    const response = await fetch(server.url + r.path, {
      method: "POST",
      headers: { "x-service-key": KEY_A, "content-type": r.contentType },
      body
    })
    if (r.path === "/v1/traces") expect(response.status).toBe(200)
    else others.push(response)
  }
  return others
}

const traceOf = async (serviceName: string): Promise<any> => {
  const list = (await (await server.get("/api/v1/traces?limit=100", KEY_A)).json()) as any
  const found = list.items.find((t: any) => t.metadata?.service_name === serviceName)
  expect(found).toBeDefined()
  return (await (await server.get(`/api/v1/traces/${found.id}`, KEY_A)).json()) as any
}

const traceOfMaybe = async (serviceName: string): Promise<any> => {
  const list = (await (await server.get("/api/v1/traces?limit=100", KEY_A)).json()) as any
  const found = list.items.find((t: any) => t.metadata?.service_name === serviceName)
  return found && (await (await server.get(`/api/v1/traces/${found.id}`, KEY_A)).json())
}

const ofType = (trace: any, type: string) => trace.spans.filter((s: any) => s.span_type === type)
const named = (trace: any, name: string) => trace.spans.filter((s: any) => s.name === name)
const tokens = (spans: ReadonlyArray<any>) => spans.map((s: any) => [s.input_tokens, s.output_tokens])
const plumbing = (s: any) => s.metadata?.framework_plumbing === true

describe("recorded framework exports", () => {
  test("Vercel AI SDK: the functionId names the trace and the agent; tool results are the tool's value", async () => {
    await replayExport("ai-sdk")
    const trace = await traceOf("ai-sdk-agent")
    expect(trace.spans.map((s: any) => s.span_type)).toEqual(["action", "llm_call", "tool_call", "llm_call"])
    expect(trace.name).toBe("weather-agent")
    expect(new Set(trace.spans.map((s: any) => s.agent_id))).toEqual(new Set(["weather-agent"]))
    expect(trace.sessionId).toBe("ai-sdk-session-1")
    expect(tokens(ofType(trace, "llm_call"))).toEqual([
      [30, 8],
      [30, 8]
    ])
    expect(trace.output).toBe(FINAL_ANSWER)
    const [first, second] = ofType(trace, "llm_call")
    expect(first.input.tools.map((t: any) => t.function.name)).toEqual([WEATHER_TOOL])
    expect(first.output.tool_calls[0].function).toEqual({ name: WEATHER_TOOL, arguments: '{"city":"Lisbon"}' })
    expect(second.input.messages.at(-1)).toMatchObject({ role: "tool", content: TOOL_RESULT })
    expect(ofType(trace, "tool_call")[0]).toMatchObject({ input: { city: "Lisbon" }, output: TOOL_RESULT })
  })

  test("LangGraph.js (OpenInference): the graph is the agent, plumbing is flagged, LangChain values are messages, the thread is the session", async () => {
    await replayExport("langgraph")
    const trace = await traceOf("langgraph-agent")
    expect(trace.spans.length).toBe(14)
    expect(trace.name).toBe("weather_agent")
    expect(trace.sessionId).toBe("langgraph-thread-1")
    expect(trace.metadata.metadata).toMatchObject({ thread_id: "langgraph-thread-1", ls_integration: "langgraph" })
    expect(new Set(trace.spans.map((s: any) => s.agent_id))).toEqual(new Set(["weather_agent"]))
    expect(
      trace.spans
        .filter(plumbing)
        .map((s: any) => s.name)
        .sort()
    ).toEqual([
      "RunnableLambda",
      "RunnableLambda",
      "RunnableSequence",
      "RunnableSequence",
      "__start__",
      "prompt",
      "prompt"
    ])
    // The graph's nodes are the agent's steps, not plumbing, and keep their LangGraph node name.
    expect(named(trace, "agent").map(plumbing)).toEqual([false, false])
    expect(named(trace, "tools")[0].metadata.langgraph).toMatchObject({ node: "tools", step: 2 })
    const calls = ofType(trace, "llm_call")
    expect(tokens(calls)).toEqual([
      [30, 8],
      [30, 8]
    ])
    expect(calls[0].input.tools.map((t: any) => t.function.name)).toEqual([WEATHER_TOOL])
    expect(calls[0].input.temperature).toBe(0.2)
    expect(JSON.stringify(trace)).not.toContain('"lc":1')
    expect(trace.output.messages.at(-1)).toMatchObject({ role: "assistant", content: FINAL_ANSWER })
    expect(ofType(trace, "tool_call")[0]).toMatchObject({ name: WEATHER_TOOL, output: TOOL_RESULT })
  })

  test("OpenAI Agents SDK (OpenInference, Responses API): agent ids, text output, finish reasons, tools", async () => {
    await replayExport("openai-agents")
    const trace = await traceOf("openai-agents")
    expect(trace.output).toBe(FINAL_ANSWER)
    const calls = ofType(trace, "llm_call")
    expect(calls.map((s: any) => s.agent_id)).toEqual(["Weather agent", "Weather agent"])
    expect(ofType(trace, "tool_call").map((s: any) => [s.name, s.agent_id, s.output])).toEqual([
      [WEATHER_TOOL, "Weather agent", TOOL_RESULT]
    ])
    expect(tokens(calls)).toEqual([
      [30, 8],
      [30, 8]
    ])
    expect(calls[0].output.tool_calls[0].function.name).toBe(WEATHER_TOOL)
    expect(calls[1].output).toMatchObject({ role: "assistant", content: FINAL_ANSWER, finish_reason: "stop" })
    expect(calls[0].input.messages[0]).toEqual({ role: "system", content: "Answer with the weather." })
    expect(calls[0].input.tools.map((t: any) => t.function.name)).toEqual([WEATHER_TOOL])
    expect(calls[0].input.tool_choice).toBe("auto")
  })

  test("Mastra (its OpenTelemetry exporter): run and step inputs and outputs, the user and the thread, internal spans flagged", async () => {
    const others = await replayExport("mastra")
    // Its log export is refused the way a traces-only receiver refuses it (docs/opentelemetry.md).
    expect(others.map((r) => r.status)).toEqual([404])
    expect(await others[0]!.json()).toMatchObject({ code: "otlp_signal_not_supported", retryable: false })

    const trace = await traceOf("mastra-agent")
    expect(trace.input).toBe("What is the weather in Lisbon?")
    expect(trace.output).toBe(FINAL_ANSWER)
    expect(trace.sessionId).toBe("mastra-thread-1")
    expect(trace.metadata.user_id).toBe("user-1")
    const run = named(trace, "invoke_agent Weather agent")[0]
    expect(run).toMatchObject({
      span_type: "action",
      agent_id: "weather-agent",
      input: "What is the weather in Lisbon?",
      output: FINAL_ANSWER
    })
    expect(run.metadata.gen_ai.system_instructions).toBe("Answer with the weather.")
    expect(new Set(trace.spans.map((s: any) => s.agent_id))).toEqual(new Set(["weather-agent"]))

    const calls = ofType(trace, "llm_call")
    expect(tokens(calls)).toEqual([
      [30, 8],
      [30, 8]
    ])
    // Each model call has its step's messages, and the first one's tool call is kept.
    expect(calls[0].input).toEqual([
      { role: "system", content: "Answer with the weather." },
      { role: "user", content: "What is the weather in Lisbon?" }
    ])
    expect(calls[0].output.tool_calls[0].function).toEqual({ name: WEATHER_TOOL, arguments: '{"city":"Lisbon"}' })
    // Mastra's step input names the earlier tool call and result instead of holding them (docs/compatibility.md).
    expect(calls[1].input.at(-1)).toEqual({ role: "tool", content: "[tool-result: get_weather]" })
    expect(calls[1].output).toMatchObject({ role: "assistant", content: FINAL_ANSWER })
    const steps = trace.spans.filter((s: any) => s.name === "agent_step Weather agent")
    expect(steps.map((s: any) => s.output?.tool_calls?.length ?? 0)).toEqual([1, 0])

    expect(trace.spans.filter(plumbing).map((s: any) => s.name)).toEqual([
      "model_chunk Weather agent",
      "model_chunk Weather agent",
      "model_chunk Weather agent"
    ])
    expect(ofType(trace, "tool_call")[0]).toMatchObject({ input: { city: "Lisbon" }, output: TOOL_RESULT })
  })

  test("LlamaIndex.TS (OpenLLMetry, protobuf): the model calls and what the instrumentation sends", async () => {
    await replayExport("llamaindex")
    const trace = await traceOf("llamaindex-agent")
    expect(trace.spans.map((s: any) => s.span_type)).toEqual(["action", "llm_call", "llm_call"])
    const calls = ofType(trace, "llm_call")
    expect(calls.map((s: any) => s.model)).toEqual(["gpt-4o-mini", "gpt-4o-mini"])
    expect(calls[1].output).toMatchObject({ role: "assistant", content: FINAL_ANSWER })
    // No tool span, no tool call in the first answer: OpenLLMetry does not send them (docs/compatibility.md).
    expect(ofType(trace, "tool_call")).toEqual([])
  })
})

describe("server replay of a recorded framework model call", () => {
  for (const [name, serviceName] of [
    ["ai-sdk", "ai-sdk-agent"],
    ["langgraph", "langgraph-agent"],
    ["openai-agents", "openai-agents"]
  ] as const) {
    test(`${name}: the first model call is sent again with its tools, so the replayed model calls the tool`, async () => {
      let trace = await traceOfMaybe(serviceName)
      if (trace === undefined) {
        await replayExport(name)
        trace = await traceOf(serviceName)
      }
      const first = ofType(trace, "llm_call")[0]
      const fork = (await (
        await server.post("/api/v1/forks", {
          trace_id: trace.id,
          fork_point_span_id: first.id,
          modified_input: "What is the weather in Porto?"
        })
      ).json()) as any
      const before = replayModel.requests.length
      const result = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
      expect(result).toMatchObject({ status: "completed", mode: "server" })
      const sent = replayModel.requests.slice(before)[0]!.body
      expect(sent.tools.map((t: any) => t.function.name)).toEqual([WEATHER_TOOL])
      expect(
        result.fidelity_caveats.some((c: string) => c.startsWith("request parameters sent again to the model: tools"))
      ).toBe(true)
      const replayed = (await (await server.get(`/api/v1/traces/${result.result_trace_id}`)).json()) as any
      const call = replayed.spans.find((s: any) => s.span_type === "llm_call")
      expect(call.output.tool_calls[0].function.name).toBe(WEATHER_TOOL)
    })
  }

  test("mastra: the first model call is sent again with its step's messages, and no tools, which the report says", async () => {
    const trace = (await traceOfMaybe("mastra-agent")) ?? (await replayExport("mastra"), await traceOf("mastra-agent"))
    const first = ofType(trace, "llm_call")[0]
    const fork = (await (
      await server.post("/api/v1/forks", {
        trace_id: trace.id,
        fork_point_span_id: first.id,
        modified_input: "What is the weather in Porto?"
      })
    ).json()) as any
    const before = replayModel.requests.length
    const result = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(result).toMatchObject({ status: "completed", mode: "server" })
    const sent = replayModel.requests.slice(before)[0]!.body
    expect(sent.messages[0]).toEqual({ role: "system", content: "Answer with the weather." })
    expect(sent.tools).toBeUndefined()
    expect(
      result.fidelity_caveats.some((c: string) => c.startsWith("no tools or request parameters were recorded"))
    ).toBe(true)
  })
})
