import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startFakeAgentModel, FINAL_ANSWER, WEATHER_TOOL, type FakeAgentModel } from "../support/FakeAgentModel.ts"
import { FRAMEWORKS, programEnv, type FrameworkName } from "../support/Frameworks.ts"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { until } from "../support/Until.ts"

/**
 * Each framework's smallest agent (one tool, two model turns), installed from the registry as a devDependency,
 * runs under Node (`node`, not Bun) in a child process against the fake agent model and exports to this running
 * server; the recorded trace is then read through the API.
 */

let model: FakeAgentModel
let server: TestServer
beforeAll(async () => {
  model = startFakeAgentModel()
  server = await startTestServer()
}, 60_000)
afterAll(async () => {
  await server.stop()
  await model.stop()
})

const runAgent = async (name: FrameworkName) => {
  const framework = FRAMEWORKS[name]
  const child = Bun.spawn(["node", framework.program], {
    env: programEnv({ MODEL_URL: model.baseUrl, OTLP_URL: server.url, TAPEDECK_KEY: KEY_A }),
    stdout: "pipe",
    stderr: "pipe"
  })
  const [code, stdout, stderr] = await Promise.all([
    child.exited,
    new Response(child.stdout).text(),
    new Response(child.stderr).text()
  ])
  if (code !== 0) throw new Error(`${name} exited with ${code}: ${stderr}`)
  expect(stdout).toContain(FINAL_ANSWER)
}

/** The trace whose resource service.name is the program's, once it holds at least `spans` spans. */
const recordedTrace = (serviceName: string, spans: number) =>
  until(
    async () => {
      const list = (await (await server.get("/api/v1/traces?limit=100", KEY_A)).json()) as any
      const found = list.items.find((t: any) => t.metadata?.service_name === serviceName)
      if (found === undefined) return undefined
      const detail = (await (await server.get(`/api/v1/traces/${found.id}`, KEY_A)).json()) as any
      return detail.spans.length >= spans ? detail : undefined
    },
    `the ${serviceName} trace`,
    60_000
  )

const ofType = (trace: any, type: string) => trace.spans.filter((s: any) => s.span_type === type)

/** What every framework's run must show: two model calls with their tokens, the tool offered to the first. */
const expectTwoModelTurns = (trace: any, before: number) => {
  const calls = ofType(trace, "llm_call")
  expect(calls.length).toBe(2)
  for (const call of calls) expect([call.model, call.input_tokens, call.output_tokens]).toEqual(["gpt-4o-mini", 30, 8])
  const sent = model.requests.slice(before)
  expect(sent.length).toBe(2)
  expect(JSON.stringify(sent[0]!.body.tools)).toContain(WEATHER_TOOL)
  expect(JSON.stringify(calls.at(-1).output)).toContain(FINAL_ANSWER)
}

describe("framework agents run under Node and are recorded", () => {
  test("Vercel AI SDK", async () => {
    const before = model.requests.length
    await runAgent("ai-sdk")
    const trace = await recordedTrace("ai-sdk-agent", 4)
    expectTwoModelTurns(trace, before)
    expect(trace.name).toBe("weather-agent")
    expect(ofType(trace, "tool_call").map((s: any) => [s.agent_id, s.output])).toEqual([
      ["weather-agent", "sunny, 21°C in Lisbon"]
    ])
    expect(ofType(trace, "llm_call")[0].input.tools[0].function.name).toBe(WEATHER_TOOL)
  }, 120_000)

  test("LangGraph.js with OpenInference", async () => {
    const before = model.requests.length
    await runAgent("langgraph")
    const trace = await recordedTrace("langgraph-agent", 14)
    expectTwoModelTurns(trace, before)
    expect(ofType(trace, "tool_call").map((s: any) => s.name)).toEqual([WEATHER_TOOL])
    expect(trace.spans.filter((s: any) => s.metadata?.framework_plumbing === true).length).toBeGreaterThan(0)
    expect(JSON.stringify(trace.output)).not.toContain('"lc":1')
    expect(ofType(trace, "llm_call")[0].input.tools[0].function.name).toBe(WEATHER_TOOL)
    expect(new Set(trace.spans.map((s: any) => s.agent_id))).toEqual(new Set(["weather_agent"]))
    expect(trace.sessionId).toBe("langgraph-thread-1")
  }, 120_000)

  test("OpenAI Agents SDK with OpenInference (Responses API)", async () => {
    const before = model.requests.length
    await runAgent("openai-agents")
    const trace = await recordedTrace("openai-agents", 8)
    expectTwoModelTurns(trace, before)
    expect(model.requests.slice(before).map((r) => r.path)).toEqual(["/v1/responses", "/v1/responses"])
    expect(ofType(trace, "llm_call").map((s: any) => s.agent_id)).toEqual(["Weather agent", "Weather agent"])
    expect(ofType(trace, "tool_call").map((s: any) => [s.name, s.agent_id])).toEqual([[WEATHER_TOOL, "Weather agent"]])
    expect(trace.output).toBe(FINAL_ANSWER)
    expect(ofType(trace, "llm_call")[1].output.content).toBe(FINAL_ANSWER)
  }, 120_000)

  test("Mastra with its OpenTelemetry exporter", async () => {
    const before = model.requests.length
    await runAgent("mastra")
    const trace = await recordedTrace("mastra-agent", 10)
    expectTwoModelTurns(trace, before)
    expect(ofType(trace, "tool_call").map((s: any) => [s.name, s.agent_id])).toEqual([
      [`execute_tool ${WEATHER_TOOL}`, "weather-agent"]
    ])
    expect(ofType(trace, "llm_call").map((s: any) => s.agent_id)).toEqual(["weather-agent", "weather-agent"])
    expect([trace.input, trace.output, trace.sessionId, trace.metadata.user_id]).toEqual([
      "What is the weather in Lisbon?",
      FINAL_ANSWER,
      "mastra-thread-1",
      "user-1"
    ])
    // The step's answer holds the tool call (its model call takes it when both arrive in one export, which the
    // exporter's batching timer does not promise under load; the recorded fixture checks that part).
    const steps = trace.spans.filter((s: any) => s.metadata?.model_step === true)
    expect(steps[0].output.tool_calls[0].function.name).toBe(WEATHER_TOOL)
  }, 120_000)

  test("LlamaIndex.TS with OpenLLMetry", async () => {
    const before = model.requests.length
    await runAgent("llamaindex")
    const trace = await recordedTrace("llamaindex-agent", 3)
    expectTwoModelTurns(trace, before)
    // OpenLLMetry's LlamaIndex instrumentation sends no tool span (docs/compatibility.md).
    expect(ofType(trace, "tool_call")).toEqual([])
  }, 120_000)
})
