import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { protobufBody } from "../support/Otlp.ts"
import { runSdkProgram, traceByOtelId } from "../support/SdkPrograms.ts"
import langfusePython from "../fixtures/otlp/langfuse-python.json"

// The Langfuse JS SDK (@langfuse/otel + @langfuse/tracing, a devDependency) run unchanged in a child process
// against the running server: only LANGFUSE_BASE_URL and the secret key point it at Tapedeck.
let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
})
afterAll(() => server.stop())

const runProgram = (secretKey: string) =>
  runSdkProgram("test/sdk-programs/langfuse-js.ts", { LANGFUSE_BASE_URL: server.url, LANGFUSE_SECRET_KEY: secretKey })

const traceOf = (otelTraceId: string) => traceByOtelId(server, otelTraceId)

describe("Langfuse JS SDK", () => {
  test("its trace lands: span types, model, tokens, input/output, session, user, environment, release", async () => {
    const { code, result, err } = await runProgram(KEY_A)
    expect({ code, flushed: result.flushed, err: err.includes("rror") ? err : "" }).toEqual({
      code: 0,
      flushed: true,
      err: ""
    })
    const trace = await traceOf(result.traceId)
    expect(trace).toBeDefined()
    expect(trace.session_id ?? trace.sessionId).toBe("sess-lf")
    expect(trace.name).toBe("parcel-support")
    expect(trace.environment).toBe("production")
    expect(trace.metadata).toMatchObject({
      user_id: "user-lf",
      tags: ["support"],
      environment: "staging",
      release: "2026.11.3",
      version: "agent-v7",
      metadata: { tier: "gold" }
    })
    expect(trace.input).toEqual({ question: "where is my parcel?", channel: "chat" })
    expect(trace.output).toEqual({ answer: "in Lyon", resolved: true })
    const generation = trace.spans.find((s: any) => s.span_type === "llm_call")
    expect(generation).toMatchObject({ model: "gpt-4o-mini", input_tokens: 120, output_tokens: 8 })
    expect(Number(generation.cost)).toBeCloseTo(0.0017, 9)
    expect(generation.output).toMatchObject({ content: "in Lyon" })
    expect(generation.metadata.gen_ai.usage.cache_read_input_tokens).toBe(100)
    expect(generation.metadata.langfuse).toMatchObject({
      model_parameters: { temperature: 0.2, max_tokens: 256 },
      prompt: { name: "support-answer", version: 3 },
      completion_start_time: "2026-11-26T12:00:00.250Z",
      metadata: { attempt: "1", route: "primary" }
    })
    expect(trace.spans.find((s: any) => s.span_type === "tool_call")?.output).toEqual({ city: "Lyon" })
    expect(trace.spans.find((s: any) => s.name === "cache_lookup")).toMatchObject({
      error: "cache unavailable: connection refused",
      metadata: { langfuse: { level: "ERROR", status_message: "cache unavailable: connection refused" } }
    })
  }, 60_000)

  test("environment, release and version are filterable as trace metadata; staging is not the sandbox", async () => {
    const { result } = await runProgram(KEY_A)
    const stored = await traceOf(result.traceId)
    const ids = async (query: string) => {
      const response = await server.get(`/api/v1/traces?limit=100&${query}`)
      expect(response.status).toBe(200)
      return ((await response.json()) as any).items.map((t: any) => t.id) as Array<string>
    }
    const metadata = (filter: object) => `metadata=${encodeURIComponent(JSON.stringify(filter))}`
    expect(await ids(metadata({ environment: "staging" }))).toContain(stored.id)
    expect(await ids(metadata({ environment: "staging", release: "2026.11.3", version: "agent-v7" }))).toContain(
      stored.id
    )
    expect(await ids(metadata({ metadata: { tier: "gold" }, tags: ["support"] }))).toContain(stored.id)
    expect(await ids(metadata({ environment: "production" }))).not.toContain(stored.id)
    expect(await ids(metadata({ environment: "staging", release: "2026.11.4" }))).not.toContain(stored.id)
    expect(await ids("env=sandbox")).not.toContain(stored.id)
    expect(await ids(`environment=sandbox&${metadata({ environment: "staging" })}`)).not.toContain(stored.id)
    for (const bad of ["not-json", "[1]", "{}", "%22staging%22", "x".repeat(2001)]) {
      const response = await server.get(`/api/v1/traces?metadata=${bad}`)
      expect(response.status).toBe(400)
      expect(((await response.json()) as any).code).toBe("validation_failed")
    }
  }, 60_000)

  test("a wrong secret key is refused and the program does not crash", async () => {
    const before = ((await (await server.get("/api/v1/traces?limit=1")).json()) as any).total
    const { code, result } = await runProgram("sk-lf-wrong")
    // The SDK's forceFlush() rejects on a refused export (as on any failed one); the program catches it and exits.
    expect({ code, flushed: result.flushed }).toEqual({ code: 0, flushed: false })
    expect((result as any).error).toContain("Unauthorized")
    expect(await traceOf(result.traceId)).toBeUndefined()
    expect(((await (await server.get("/api/v1/traces?limit=1")).json()) as any).total).toBe(before)
  }, 60_000)

  // The Python SDK cannot be installed here (PyPI is out of reach): its export, crafted from its source
  // (test/fixtures/otlp/langfuse-python.json), sent as its OpenTelemetry HTTP exporter sends it: protobuf, Basic auth,
  // the SDK's underscore headers.
  test("the Langfuse Python SDK v3 export (protobuf) lands; a wrong secret is a 401", async () => {
    const { path, headers, body } = langfusePython[0]!
    const send = (secret: string) =>
      fetch(`${server.url}${path}`, {
        method: "POST",
        headers: {
          ...headers,
          authorization: `Basic ${Buffer.from(`pk-lf-tapedeck:${secret}`).toString("base64")}`
        },
        body: protobufBody(body)
      })
    const refused = await send("sk-lf-wrong")
    expect(refused.status).toBe(401)
    expect(refused.headers.get("content-type")).toBe("application/x-protobuf")
    const accepted = await send(KEY_A)
    expect(accepted.status).toBe(200)
    expect(accepted.headers.get("content-type")).toBe("application/x-protobuf")
    const trace = await traceOf(body.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.traceId)
    expect(trace).toMatchObject({ name: "parcel-support", environment: "production" })
    expect(trace.session_id ?? trace.sessionId).toBe("sess-py")
    expect(trace.metadata).toMatchObject({ user_id: "user-py", environment: "staging", release: "2026.11.3" })
    const generation = trace.spans.find((s: any) => s.span_type === "llm_call")
    expect(generation).toMatchObject({ model: "gpt-4o-mini", input_tokens: 120, output_tokens: 8 })
    expect(generation.metadata.gen_ai.usage.cache_read_input_tokens).toBe(100)
  }, 60_000)
})
