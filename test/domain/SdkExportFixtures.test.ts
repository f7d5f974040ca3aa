import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { mapSpan } from "#src/domain/genai/MapSpan"
import { decodeOtlpJson } from "#layers/ingest/OtlpDecode"
import { accountSpanIds } from "#layers/ingest/OtlpIds"
import { finalizeTrace } from "#layers/ingest/TraceFinalize"
import langfuseJs from "../fixtures/otlp/langfuse-js.json"

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
