import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { mapSpan } from "#src/domain/genai/MapSpan"
import { decodeOtlpJson } from "#layers/ingest/OtlpDecode"
import { accountSpanIds } from "#layers/ingest/OtlpIds"
import { finalizeTrace } from "#layers/ingest/TraceFinalize"
import langfuseJs from "../fixtures/otlp/langfuse-js.json"
import laminarJs from "../fixtures/otlp/laminar-js.json"
import openllmetryJs from "../fixtures/otlp/openllmetry-js.json"
import phoenixJs from "../fixtures/otlp/phoenix-js.json"

// Raw exports recorded once from the real SDKs on loopback (test/fixtures/otlp/record-export.ts), mapped here
// without a server: what each SDK sends, attribute for attribute, and what we make of it.
const IDS = accountSpanIds("00000000-0000-4000-8000-000000000001")

const mappedExport = (recorded: ReadonlyArray<{ body: unknown }>) => {
  const spans = recorded.flatMap(({ body }) => Either.getOrThrow(decodeOtlpJson(body)).spans)
  const mapped = spans.map((s) => mapSpan(IDS, s)!)
  return { mapped, trace: finalizeTrace(mapped.map((m) => m.span)).trace }
}

describe("Langfuse JS SDK 5.11 export (test/sdk-programs/langfuse-js.ts)", () => {
  const { mapped, trace } = mappedExport(langfuseJs)
  const byName = (name: string) => mapped.find((m) => m.span.name === name)!.span

  test("observation types become span types", () => {
    expect(byName("support-run").span_type).toBe("action")
    expect(byName("answer").span_type).toBe("llm_call")
    expect(byName("track_parcel").span_type).toBe("tool_call")
    expect(mapped.every((m) => m.span.metadata.source === "langfuse")).toBe(true)
  })

  test("the generation: model, tokens incl. cached, cost, parameters, input and output", () => {
    const generation = byName("answer")
    expect(generation).toMatchObject({ model: "gpt-4o-mini", input_tokens: 120, output_tokens: 8 })
    expect(generation.cost).toBeCloseTo(0.0016, 9)
    expect((generation.metadata.gen_ai as any).usage.cache_read_input_tokens).toBe(100)
    expect((generation.metadata.langfuse as any).model_parameters).toMatchObject({ temperature: 0.2 })
    // The messages, alone or beside the request parameters (conventions/RequestParameters.ts).
    const input = generation.input as any
    expect(Array.isArray(input) ? input : input.messages).toEqual([{ role: "user", content: "where is my parcel?" }])
    expect(generation.output).toMatchObject({ content: "in Lyon" })
  })

  test("the trace: session, user, tags, propagated metadata, environment name and release", () => {
    expect(trace.sessionId).toBe("sess-lf")
    expect(trace.environment).toBe("production")
    expect(trace.metadata).toMatchObject({
      user_id: "user-lf",
      tags: ["support"],
      environment: "staging",
      release: "2026.11.3",
      metadata: { tier: "gold" }
    })
    expect(trace.input).toEqual({ question: "where is my parcel?" })
    expect(trace.output).toEqual({ answer: "in Lyon" })
  })
})

describe("Laminar JS SDK 0.8 export (test/sdk-programs/laminar-js.ts)", () => {
  const { mapped, trace } = mappedExport(laminarJs)
  const byName = (name: string) => mapped.find((m) => m.span.name === name)!.span

  test("lmnr.span.type: TOOL is a tool call, LLM a model call with its model and tokens", () => {
    expect(byName("track_parcel")).toMatchObject({ span_type: "tool_call", metadata: { source: "laminar" } })
    expect(byName("answer")).toMatchObject({
      span_type: "llm_call",
      model: "gpt-4o-mini",
      input_tokens: 120,
      output_tokens: 8
    })
    expect(byName("support-run").span_type).toBe("action")
  })

  test("lmnr.span.input / output are the spans' input and output, the root's the trace's", () => {
    expect(byName("track_parcel").input).toEqual(["P-1"])
    expect(byName("track_parcel").output).toEqual({ parcel: "P-1", city: "Lyon" })
    expect(byName("answer").output).toMatchObject({ content: "where is my parcel? in Lyon" })
    expect(trace.input).toEqual(["where is my parcel?"])
    expect(trace.output).toEqual({ answer: "where is my parcel? in Lyon", where: { parcel: "P-1", city: "Lyon" } })
  })

  test("association properties: session, user, tags and metadata on the trace", () => {
    expect(trace.sessionId).toBe("sess-lmnr")
    expect(trace.metadata).toMatchObject({ user_id: "user-lmnr", tags: ["support"], metadata: { tier: "gold" } })
  })
})

describe("Phoenix (phoenix-otel 2.1 + OpenInference OpenAI 4.2) export (test/sdk-programs/phoenix-js.ts)", () => {
  const { mapped, trace } = mappedExport(phoenixJs)
  const byName = (name: string) => mapped.find((m) => m.span.name === name)!.span

  test("the OpenAI call: model, tokens and messages from the flattened OpenInference attributes", () => {
    expect(byName("OpenAI Chat Completions")).toMatchObject({
      span_type: "llm_call",
      model: "gpt-4o-mini",
      input_tokens: 120,
      output_tokens: 8,
      input: [{ role: "user", content: "where is my parcel?" }],
      output: { role: "assistant", content: "in Lyon" }
    })
  })

  test("openinference.project.name is the trace's project: the UUIDv5 of the account's namespace and the name", () => {
    expect(trace.projectId).toBe(IDS.project("support-app"))
    expect(mappedExport(phoenixJs).trace.projectId).toBe(trace.projectId)
    const other = accountSpanIds("00000000-0000-4000-8000-000000000002")
    const elsewhere = finalizeTrace(
      phoenixJs.flatMap(({ body }) => Either.getOrThrow(decodeOtlpJson(body)).spans).map((s) => mapSpan(other, s)!.span)
    ).trace
    expect(elsewhere.projectId).not.toBe(trace.projectId)
  })

  test("session, user, tag.tags and metadata (from the context the OpenInference helpers set) onto the trace", () => {
    expect(trace.sessionId).toBe("sess-px")
    expect(trace.metadata).toMatchObject({ user_id: "user-px", tags: ["support"], metadata: { tier: "gold" } })
    expect(trace.input).toBe("where is my parcel?")
    expect(trace.output).toBe("in Lyon")
  })
})

describe("OpenLLMetry (@traceloop/node-server-sdk 0.27) export (test/sdk-programs/openllmetry-js.ts)", () => {
  const { mapped, trace } = mappedExport(openllmetryJs)
  const byName = (name: string) => mapped.find((m) => m.span.name === name)!.span

  test("workflow, tool and model call spans", () => {
    expect(byName("support-run.workflow").span_type).toBe("action")
    expect(byName("track_parcel.tool")).toMatchObject({
      span_type: "tool_call",
      output: { parcel: "P-1", city: "Lyon" }
    })
    expect(byName("chat gpt-4o-mini")).toMatchObject({
      span_type: "llm_call",
      model: "gpt-4o-mini",
      input_tokens: 120,
      output_tokens: 8,
      output: { role: "assistant", content: "in Lyon" }
    })
  })

  test("the workflow names the trace; association properties give session and user", () => {
    expect(trace.name).toBe("support-run")
    expect(trace.sessionId).toBe("sess-ol")
    expect(trace.metadata).toMatchObject({ user_id: "user-ol", service_name: "support-app" })
  })
})
