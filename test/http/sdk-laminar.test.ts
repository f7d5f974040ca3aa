import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { GRPC_ENV, KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { until } from "../support/Until.ts"

// The Laminar JS SDK (@lmnr-ai/lmnr, a devDependency) run unchanged in a child process against the running server,
// over its default transport (OTLP/gRPC) and with forceHttp (OTLP/HTTP protobuf).
let server: TestServer
beforeAll(async () => {
  server = await startTestServer(GRPC_ENV)
})
afterAll(() => server.stop())

const runProgram = async (key: string, forceHttp: boolean) => {
  const child = Bun.spawn([process.execPath, "test/sdk-programs/laminar-js.ts"], {
    env: {
      ...process.env,
      LMNR_BASE_URL: "http://127.0.0.1",
      LMNR_GRPC_PORT: String(server.grpcPort),
      LMNR_HTTP_PORT: new URL(server.url).port,
      LMNR_PROJECT_API_KEY: key,
      LMNR_FORCE_HTTP: String(forceHttp)
    },
    stdout: "pipe",
    stderr: "pipe"
  })
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  return {
    code,
    err,
    result: JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as { traceId: string; flushed: boolean; error?: string }
  }
}

const findTrace = async (otelTraceId: string): Promise<any> => {
  const list = (await (await server.get("/api/v1/traces?limit=100")).json()) as any
  const found = list.items.find((t: any) => t.metadata?.otel?.trace_id === otelTraceId)
  return found === undefined ? undefined : (await server.get(`/api/v1/traces/${found.id}`)).json()
}

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
