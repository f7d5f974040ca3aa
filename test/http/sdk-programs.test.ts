import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type FakeOpenAi, startFakeOpenAi } from "../support/FakeOpenAi.ts"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { runSdkProgram, traceByOtelId } from "../support/SdkPrograms.ts"
import { until } from "../support/Until.ts"

// Phoenix (@arizeai/phoenix-otel + OpenInference's OpenAI instrumentation) and OpenLLMetry
// (@traceloop/node-server-sdk), devDependencies, each run unchanged in a child process against the running server;
// their OpenAI client talks to a stand-in model server. The Langfuse and Laminar SDKs have files of their own.
let server: TestServer
let model: FakeOpenAi
beforeAll(async () => {
  server = await startTestServer()
  model = startFakeOpenAi(() => ({ content: "in Lyon", usage: { prompt_tokens: 120, completion_tokens: 8 } }))
})
afterAll(async () => {
  await model.stop()
  await server.stop()
})

const SDKS = {
  phoenix: {
    program: "test/sdk-programs/phoenix-js.ts",
    env: (key: string) => ({ PHOENIX_COLLECTOR_ENDPOINT: server.url, PHOENIX_API_KEY: key }),
    spans: 2
  },
  openllmetry: {
    program: "test/sdk-programs/openllmetry-js.ts",
    env: (key: string) => ({ TRACELOOP_BASE_URL: server.url, TRACELOOP_API_KEY: key }),
    spans: 3
  }
} as const

const runProgram = (sdk: keyof typeof SDKS, key: string) =>
  runSdkProgram(SDKS[sdk].program, { ...SDKS[sdk].env(key), OPENAI_BASE_URL: model.baseUrl })

const findTrace = (otelTraceId: string) => traceByOtelId(server, otelTraceId)

const landed = (sdk: keyof typeof SDKS, otelTraceId: string) =>
  until(
    async () => {
      const trace = await findTrace(otelTraceId)
      return trace?.spans?.length === SDKS[sdk].spans ? trace : undefined
    },
    `${sdk} trace ${otelTraceId}`,
    30_000
  )

describe("Phoenix (phoenix-otel register + OpenInference OpenAI instrumentation)", () => {
  test("its trace lands: model call, tokens, messages, session, user, tags, metadata, project", async () => {
    const { code, result, err } = await runProgram("phoenix", KEY_A)
    expect({ code, flushed: result.flushed, err: /rror|deserialize/.test(err) ? err : "" }).toEqual({
      code: 0,
      flushed: true,
      err: ""
    })
    const trace = await landed("phoenix", result.traceId)
    expect(trace.session_id ?? trace.sessionId).toBe("sess-px")
    expect(trace.metadata).toMatchObject({ user_id: "user-px", tags: ["support"], metadata: { tier: "gold" } })
    // openinference.project.name: a UUID stable per account and name (docs/compatibility.md).
    expect(trace.project_id ?? trace.projectId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-/)
    expect(trace.input).toBe("where is my parcel?")
    const llm = trace.spans.find((s: any) => s.span_type === "llm_call")
    expect(llm).toMatchObject({ model: "gpt-4o-mini", input_tokens: 120, output_tokens: 8 })
    expect(llm.input).toEqual([{ role: "user", content: "where is my parcel?" }])
    expect(llm.output).toMatchObject({ role: "assistant", content: "in Lyon" })
  }, 60_000)

  test("a wrong key is refused, nothing lands, and the program does not crash", async () => {
    const { code, result } = await runProgram("phoenix", "svc_wrong_key")
    expect(code).toBe(0)
    expect(result.traceId).toMatch(/^[0-9a-f]{32}$/)
    expect(await findTrace(result.traceId)).toBeUndefined()
  }, 60_000)
})

describe("OpenLLMetry (@traceloop/node-server-sdk initialize)", () => {
  test("its trace lands: workflow, tool, model call, tokens, messages, session, user", async () => {
    const { code, result, err } = await runProgram("openllmetry", KEY_A)
    expect({ code, flushed: result.flushed, err: /rror|deserialize/.test(err) ? err : "" }).toEqual({
      code: 0,
      flushed: true,
      err: ""
    })
    const trace = await landed("openllmetry", result.traceId)
    expect(trace.name).toBe("support-run")
    expect(trace.session_id ?? trace.sessionId).toBe("sess-ol")
    expect(trace.metadata).toMatchObject({ user_id: "user-ol" })
    expect(trace.output).toBe("in Lyon")
    const llm = trace.spans.find((s: any) => s.span_type === "llm_call")
    expect(llm).toMatchObject({ model: "gpt-4o-mini", input_tokens: 120, output_tokens: 8 })
    expect(llm.output).toMatchObject({ role: "assistant", content: "in Lyon" })
    expect(trace.spans.find((s: any) => s.span_type === "tool_call")?.output).toEqual({ parcel: "P-1", city: "Lyon" })
  }, 60_000)

  test("a wrong key is refused, nothing lands, and the program does not crash", async () => {
    const { code, result } = await runProgram("openllmetry", "svc_wrong_key")
    expect(code).toBe(0)
    expect(result.traceId).toMatch(/^[0-9a-f]{32}$/)
    expect(await findTrace(result.traceId)).toBeUndefined()
  }, 60_000)
})
