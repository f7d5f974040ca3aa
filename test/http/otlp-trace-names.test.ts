import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as F from "../fixtures/otlp/GenAiFixtures.ts"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { hex } from "../support/Otlp.ts"

// A trace received over OTLP is named by its instrumentation where it names the run (an AI SDK functionId, an
// OpenLLMetry or GenAI workflow name, Langfuse's trace name), else by its root span. The fixtures of the mapping
// reference, sent as OTLP/JSON, each under a fresh trace id.
let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
})
afterAll(() => server.stop())

const anyValue = (v: unknown): unknown =>
  typeof v === "string"
    ? { stringValue: v }
    : typeof v === "boolean"
      ? { boolValue: v }
      : typeof v === "number"
        ? Number.isInteger(v)
          ? { intValue: String(v) }
          : { doubleValue: v }
        : Array.isArray(v)
          ? { arrayValue: { values: v.map(anyValue) } }
          : { stringValue: JSON.stringify(v) }

const attributes = (a: Record<string, unknown>) =>
  Object.entries(a).map(([key, value]) => ({ key, value: anyValue(value) }))

/** The fixtures as one OTLP/JSON export under a new trace id (one resource and scope per span, as fixtures give them). */
const exportOf = (spans: ReadonlyArray<F.CompactSpan>, traceId: string) => ({
  resourceSpans: spans.map((c) => ({
    resource: { attributes: attributes(c.resource ?? { "service.name": "fixture-app" }) },
    scopeSpans: [
      {
        scope: { name: c.scope?.name ?? "fixture", version: c.scope?.version ?? "1.0" },
        spans: [
          {
            traceId,
            spanId: c.spanId,
            ...(c.parentSpanId === "" ? {} : { parentSpanId: c.parentSpanId }),
            name: c.name,
            kind: c.kind,
            startTimeUnixNano: c.startTimeUnixNano,
            endTimeUnixNano: c.endTimeUnixNano,
            attributes: attributes(c.attributes),
            ...(c.status ? { status: c.status } : {}),
            ...(c.flags === undefined ? {} : { flags: c.flags })
          }
        ]
      }
    ]
  }))
})

/** Sends the spans as one trace; its name as listed and as the detail shows it. */
const nameOf = async (spans: ReadonlyArray<F.CompactSpan>) => {
  const traceId = hex(16)
  const sent = await server.post("/v1/traces", exportOf(spans, traceId), KEY_A)
  expect(sent.status).toBe(200)
  const detail = (await (await server.get(`/api/v1/traces/${traceId}`, KEY_A)).json()) as {
    id: string
    name: string | null
  }
  const list = (await (
    await server.get(`/api/v1/traces?name=${encodeURIComponent(detail.name ?? "")}&limit=100`, KEY_A)
  ).json()) as {
    items: ReadonlyArray<{ id: string; name: string | null }>
  }
  expect(list.items.find((t) => t.id === detail.id)?.name).toBe(detail.name)
  return detail.name
}

const root = (over: Partial<F.CompactSpan> & Pick<F.CompactSpan, "spanId" | "name">): F.CompactSpan => ({
  traceId: "",
  parentSpanId: "",
  kind: 2,
  startTimeUnixNano: "1787219999990000000",
  endTimeUnixNano: "1787220001100000000",
  attributes: {},
  ...over
})

describe("OTLP trace names", () => {
  test("Vercel AI SDK: the functionId, not the root span's ai.generateText", async () => {
    expect(await nameOf([F.fixture8Parent, F.fixture8])).toBe("support-bot")
  })

  test("AI SDK under a plain HTTP root span: the functionId found on the spans below it", async () => {
    const http = root({
      spanId: "1111111111111111",
      name: "POST /api/chat",
      attributes: { "http.request.method": "POST" }
    })
    expect(await nameOf([http, { ...F.fixture8Parent, parentSpanId: http.spanId }, F.fixture8])).toBe("support-bot")
  })

  test("OpenLLMetry: the workflow name (traceloop.workflow.name)", async () => {
    expect(await nameOf([F.fixture6, F.fixture7])).toBe("summarize_doc")
  })

  test("OpenLLMetry's workflow name on a task under a plain root names the trace", async () => {
    const http = root({ spanId: "2222222222222222", name: "GET /summarize" })
    const task = { ...F.fixture7, parentSpanId: http.spanId }
    expect(task.attributes["traceloop.workflow.name"]).toBe("summarize_doc")
    expect(await nameOf([http, task])).toBe("summarize_doc")
  })

  test("the GenAI workflow name, and Langfuse's explicit trace name before any other", async () => {
    const workflow = root({
      spanId: "3333333333333333",
      name: "invoke_workflow",
      attributes: { "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "triage" }
    })
    expect(await nameOf([workflow])).toBe("triage")
    const named = root({
      spanId: "4444444444444444",
      name: "ai.generateText",
      attributes: { "langfuse.trace.name": "nightly triage", "ai.telemetry.functionId": "triage-bot" }
    })
    expect(await nameOf([named])).toBe("nightly triage")
  })

  test("without an instrumentation name: the root span's name (OpenInference and LangSmith name their root spans)", async () => {
    expect(await nameOf([F.fixture10Parent, F.fixture10])).toBe("RunnableSequence")
    const plain = root({
      spanId: "5555555555555555",
      name: "agent loop",
      attributes: { "openinference.span.kind": "AGENT" }
    })
    expect(await nameOf([plain])).toBe("agent loop")
  })
})
