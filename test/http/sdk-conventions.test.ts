import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { attr, hex, ns } from "../support/Otlp.ts"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"

// Exports shaped as each SDK sends them (attribute names and encodings as their exporters write them), posted
// where each SDK posts, then read back through the Traces API.
let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
})
afterAll(() => server.stop())

type Value = string | number | boolean | ReadonlyArray<string>
const kv = (key: string, value: Value) =>
  Array.isArray(value)
    ? { key, value: { arrayValue: { values: value.map((v) => ({ stringValue: v })) } } }
    : attr(key, value as string | number | boolean)

const span = (
  traceId: string,
  spanId: string,
  parent: string | undefined,
  name: string,
  attributes: Record<string, Value>,
  startMs = 0
) => ({
  traceId,
  spanId,
  ...(parent ? { parentSpanId: parent } : {}),
  name,
  kind: 1,
  startTimeUnixNano: ns(startMs),
  endTimeUnixNano: ns(startMs + 500),
  attributes: Object.entries(attributes).map(([k, v]) => kv(k, v))
})

const body = (spans: ReadonlyArray<unknown>, resource: Record<string, Value> = { "service.name": "sdk-test" }) => ({
  resourceSpans: [
    {
      resource: { attributes: Object.entries(resource).map(([k, v]) => kv(k, v)) },
      scopeSpans: [{ scope: { name: "sdk" }, spans }]
    }
  ]
})

const postTo = async (path: string, payload: unknown, headers: Record<string, string>) => {
  const response = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(payload)
  })
  expect(response.status).toBe(200)
  return response.json() as Promise<any>
}

const traceOf = async (otelTraceId: string, query = ""): Promise<any> => {
  const list = (await (await server.get(`/api/v1/traces?limit=100${query}`)).json()) as any
  const found = list.items.find((t: any) => t.metadata?.otel?.trace_id === otelTraceId)
  expect(found).toBeDefined()
  return (await server.get(`/api/v1/traces/${found.id}`)).json()
}

const langfuseAuth = { authorization: `Basic ${Buffer.from(`pk-lf-demo:${KEY_A}`).toString("base64")}` }

describe("Langfuse attributes", () => {
  test("trace name/metadata/environment/release/version, generation with parameters, usage incl. cached tokens, cost, prompt", async () => {
    const traceId = hex(16)
    const root = hex(8)
    const gen = hex(8)
    const result = await postTo(
      "/api/public/otel/v1/traces",
      body([
        span(traceId, root, undefined, "support-agent", {
          "langfuse.observation.type": "agent",
          "langfuse.trace.name": "support run",
          "langfuse.trace.input": JSON.stringify({ question: "where is my parcel?" }),
          "langfuse.trace.output": JSON.stringify({ answer: "in Lyon" }),
          "langfuse.trace.tags": ["support", "beta"],
          "langfuse.trace.metadata.customer_tier": "gold",
          "langfuse.trace.metadata.region": "eu",
          "langfuse.environment": "staging",
          "langfuse.release": "2026.11.3",
          "langfuse.version": "v7",
          "session.id": "sess-lf-1",
          "user.id": "user-lf-1"
        }),
        span(
          traceId,
          gen,
          root,
          "answer",
          {
            "langfuse.observation.type": "generation",
            "langfuse.observation.model.name": "gpt-4o-mini",
            "langfuse.observation.model.parameters": JSON.stringify({ temperature: 0.2, max_tokens: 256 }),
            "langfuse.observation.input": JSON.stringify([{ role: "user", content: "where is my parcel?" }]),
            "langfuse.observation.output": JSON.stringify({ role: "assistant", content: "in Lyon" }),
            "langfuse.observation.usage_details": JSON.stringify({ input: 120, output: 8, input_cached_tokens: 100 }),
            "langfuse.observation.cost_details": JSON.stringify({ input: 0.0012, output: 0.0004 }),
            "langfuse.observation.completion_start_time": JSON.stringify("2026-08-20T10:00:00.120Z"),
            "langfuse.observation.prompt.name": "support-answer",
            "langfuse.observation.prompt.version": 3,
            "langfuse.observation.metadata.attempt": 1,
            "langfuse.observation.level": "WARNING",
            "langfuse.observation.status_message": "slow upstream"
          },
          100
        )
      ]),
      langfuseAuth
    )
    expect(result).toMatchObject({ traces_created: 1, spans_ingested: 2 })

    const trace = await traceOf(traceId)
    expect(trace.name).toBe("support run")
    expect(trace.environment).toBe("production")
    expect(trace.session_id ?? trace.sessionId).toBe("sess-lf-1")
    expect(trace.metadata).toMatchObject({
      user_id: "user-lf-1",
      tags: ["support", "beta"],
      environment: "staging",
      release: "2026.11.3",
      version: "v7",
      metadata: { customer_tier: "gold", region: "eu" }
    })
    const generation = trace.spans.find((s: any) => s.span_type === "llm_call")
    expect(generation).toMatchObject({ model: "gpt-4o-mini", input_tokens: 120, output_tokens: 8 })
    expect(generation.cost).toBeCloseTo(0.0016, 6)
    expect(generation.metadata.gen_ai.usage.cache_read_input_tokens).toBe(100)
    expect(generation.metadata.langfuse).toMatchObject({
      model_parameters: { temperature: 0.2, max_tokens: 256 },
      prompt: { name: "support-answer", version: 3 },
      completion_start_time: "2026-08-20T10:00:00.120Z",
      metadata: { attempt: 1 },
      level: "WARNING",
      status_message: "slow upstream"
    })
    // Read into fields, so not repeated among the leftover attributes.
    expect(Object.keys(generation.metadata.attributes ?? {}).filter((k) => k.startsWith("langfuse."))).toEqual([])
  })

  test("only the environment named sandbox makes a sandbox trace", async () => {
    const traceId = hex(16)
    await postTo(
      "/api/public/otel/v1/traces",
      body([
        span(traceId, hex(8), undefined, "try", {
          "langfuse.environment": "sandbox",
          "langfuse.observation.type": "span"
        })
      ]),
      langfuseAuth
    )
    const trace = await traceOf(traceId, "&env=sandbox")
    expect(trace.environment).toBe("sandbox")
  })
})

describe("Laminar attributes", () => {
  test("lmnr.span.input/output/type and association properties", async () => {
    const traceId = hex(16)
    const root = hex(8)
    const association = {
      "lmnr.association.properties.session_id": "sess-lmnr",
      "lmnr.association.properties.user_id": "user-lmnr",
      "lmnr.association.properties.tags": ["nightly"],
      "lmnr.association.properties.metadata.team": "growth"
    }
    await postTo(
      "/v1/traces",
      body([
        span(traceId, root, undefined, "plan_trip", {
          "lmnr.span.type": "DEFAULT",
          "lmnr.span.input": JSON.stringify({ city: "Lisbon" }),
          "lmnr.span.output": JSON.stringify("three days"),
          ...association
        }),
        span(
          traceId,
          hex(8),
          root,
          "search_hotels",
          {
            "lmnr.span.type": "TOOL",
            "lmnr.span.input": JSON.stringify({ city: "Lisbon" }),
            "lmnr.span.output": JSON.stringify([{ name: "Casa" }]),
            ...association
          },
          50
        ),
        span(
          traceId,
          hex(8),
          root,
          "openai.chat",
          {
            "lmnr.span.type": "LLM",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 30,
            "gen_ai.usage.output_tokens": 4,
            ...association
          },
          100
        )
      ]),
      { "x-service-key": KEY_A }
    )
    const trace = await traceOf(traceId)
    expect(trace.session_id ?? trace.sessionId).toBe("sess-lmnr")
    expect(trace.metadata).toMatchObject({ user_id: "user-lmnr", tags: ["nightly"], metadata: { team: "growth" } })
    expect(trace.input).toEqual({ city: "Lisbon" })
    expect(trace.output).toBe("three days")
    const tool = trace.spans.find((s: any) => s.name.includes("search_hotels"))
    expect(tool).toMatchObject({ span_type: "tool_call", input: { city: "Lisbon" }, output: [{ name: "Casa" }] })
    expect(tool.metadata.source).toBe("laminar")
    expect(trace.spans.find((s: any) => s.span_type === "llm_call")).toMatchObject({
      model: "gpt-4o",
      input_tokens: 30
    })
  })
})

describe("OpenInference attributes", () => {
  test("openinference.project.name is the trace's project (a stable UUID per account and name); metadata onto the trace", async () => {
    const traceId = hex(16)
    await postTo(
      "/v1/traces",
      body(
        [
          span(traceId, hex(8), undefined, "ChatCompletion", {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": 11,
            "llm.token_count.completion": 2,
            metadata: JSON.stringify({ experiment: "b" }),
            "tag.tags": ["phoenix"]
          })
        ],
        { "service.name": "phoenix-app", "openinference.project.name": "checkout-bot" }
      ),
      { "x-service-key": KEY_A }
    )
    const trace = await traceOf(traceId)
    expect(trace.project_id ?? trace.projectId).toMatch(/^[0-9a-f-]{36}$/)
    expect(trace.metadata).toMatchObject({ tags: ["phoenix"], metadata: { experiment: "b" } })

    // The same name gives the same project on another trace.
    const other = hex(16)
    await postTo(
      "/v1/traces",
      body([span(other, hex(8), undefined, "x", { "openinference.span.kind": "CHAIN" })], {
        "openinference.project.name": "checkout-bot"
      }),
      { "x-service-key": KEY_A }
    )
    expect((await traceOf(other)).project_id ?? (await traceOf(other)).projectId).toBe(
      trace.project_id ?? trace.projectId
    )
  })
})
