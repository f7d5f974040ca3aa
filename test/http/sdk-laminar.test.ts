import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { GRPC_ENV, KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { runSdkProgram, traceByOtelId } from "../support/SdkPrograms.ts"
import { until } from "../support/Until.ts"

// The Laminar JS SDK (@lmnr-ai/lmnr, a devDependency) run unchanged in a child process against the running server,
// over its default transport (OTLP/gRPC) and with forceHttp (OTLP/HTTP protobuf).
let server: TestServer
beforeAll(async () => {
  server = await startTestServer(GRPC_ENV)
})
afterAll(() => server.stop())

const runProgram = (key: string, forceHttp: boolean) =>
  runSdkProgram("test/sdk-programs/laminar-js.ts", {
    LMNR_BASE_URL: "http://127.0.0.1",
    LMNR_GRPC_PORT: String(server.grpcPort),
    LMNR_HTTP_PORT: new URL(server.url).port,
    LMNR_PROJECT_API_KEY: key,
    LMNR_FORCE_HTTP: String(forceHttp)
  })

const findTrace = (otelTraceId: string) => traceByOtelId(server, otelTraceId)

const landed = (otelTraceId: string) =>
  until(
    async () => {
      const trace = await findTrace(otelTraceId)
      return trace?.spans?.length === 3 ? trace : undefined
    },
    `Laminar trace ${otelTraceId}`,
    30_000
  )

describe.each([
  ["OTLP/gRPC (its default)", false],
  ["OTLP/HTTP (forceHttp)", true]
] as const)("Laminar JS SDK over %s", (_transport, forceHttp) => {
  test("its trace lands: span types, model, tokens, input/output, session, user, tags, metadata", async () => {
    const { code, result, err } = await runProgram(KEY_A, forceHttp)
    expect({ code, flushed: result.flushed, err: /rror|UNAVAILABLE/.test(err) ? err : "" }).toEqual({
      code: 0,
      flushed: true,
      err: ""
    })
    const trace = await landed(result.traceId)
    expect(trace.session_id ?? trace.sessionId).toBe("sess-lmnr")
    expect(trace.metadata).toMatchObject({ user_id: "user-lmnr", tags: ["support"], metadata: { tier: "gold" } })
    expect(trace.input).toBeDefined()
    const llm = trace.spans.find((s: any) => s.span_type === "llm_call")
    expect(llm).toMatchObject({ model: "gpt-4o-mini", input_tokens: 120, output_tokens: 8 })
    const tool = trace.spans.find((s: any) => s.span_type === "tool_call")
    expect(tool?.name).toBe("track_parcel")
    expect(tool?.output).toEqual({ parcel: "P-1", city: "Lyon" })
    const root = trace.spans.find((s: any) => s.name === "support-run")
    expect(root.output).toMatchObject({ answer: "where is my parcel? in Lyon" })
  }, 60_000)

  test("a wrong key is refused, nothing lands, and the program does not crash", async () => {
    const { code, result } = await runProgram("svc_wrong_key", forceHttp)
    expect(code).toBe(0)
    expect(result.traceId).toMatch(/^[0-9a-f]{32}$/)
    await Bun.sleep(500)
    expect(await findTrace(result.traceId)).toBeUndefined()
  }, 60_000)
})
