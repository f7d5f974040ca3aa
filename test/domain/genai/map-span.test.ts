import { describe, expect, test } from "bun:test"
import { Either, FastCheck as fc, Schema } from "effect"

import { mapSpan, type MappedSpan } from "#src/domain/genai/MapSpan"
import { accountSpanIds } from "#layers/ingest/OtlpIds"
import { MAX_JSON_DEPTH, unstorableReason } from "#src/domain/Json"
import type { OtlpSpan } from "#src/domain/Otlp"
import { Span, SPAN_TEXT_LIMITS } from "#src/domain/Span"
import * as F from "../../fixtures/otlp/GenAiFixtures.ts"

const IDS = accountSpanIds(F.ACME)
type Mapped = MappedSpan["span"]

const mapped = (c: F.CompactSpan): Mapped => {
  const m = mapSpan(IDS, F.otlpSpan(c))
  if (m === undefined) throw new Error("span was skipped")
  return m.span
}

/** A span in the fixture's compact form with only what a test needs. */
const compact = (attributes: Record<string, unknown>, over: Partial<F.CompactSpan> = {}): F.CompactSpan => ({
  traceId: "0123456789abcdef0123456789abcdef",
  spanId: "0011223344556677",
  parentSpanId: "8899aabbccddeeff",
  name: "span",
  kind: 1,
  startTimeUnixNano: "1787220000000000000",
  endTimeUnixNano: "1787220001000000000",
  attributes,
  ...over
})

const FIELDS = [
  "id",
  "parent_id",
  "span_type",
  "name",
  "model",
  "input",
  "output",
  "input_tokens",
  "output_tokens",
  "cost",
  "duration_ms",
  "agent_id",
  "agent_role",
  "parent_agent_id",
  "started_at",
  "ended_at",
  "error"
] as const

/**
 * Fixture notation: every listed field equals the expectation, field by field; fields not listed are absent; `metadata`
 * is a subset match.
 */
const expectSpan = (actual: Mapped, expected: Partial<Mapped> & { metadata: Record<string, unknown> }) => {
  for (const field of FIELDS) {
    if (field in expected) expect({ [field]: actual[field] }).toEqual({ [field]: expected[field] })
    else expect({ [field]: actual[field] }).toEqual({ [field]: undefined })
  }
  expect(actual.metadata).toMatchObject(expected.metadata)
}

/** The mapped span is a valid API Span, and every jsonb column is one PostgreSQL can store. */
const expectValid = (span: Mapped) => {
  const decoded = Schema.decodeUnknownEither(Span)(span)
  if (Either.isLeft(decoded)) throw new Error(String(decoded.left))
  expect(unstorableReason(span.metadata)).toBeUndefined()
  expect(unstorableReason(span.input)).toBeUndefined()
  expect(unstorableReason(span.output)).toBeUndefined()
}

describe("mapSpan: the ten fixtures (one per instrumentation family)", () => {
  test("fixture 1: OTel GenAI chat span, content as JSON strings (row 5)", () => {
    const span = mapped(F.fixture1)
    expectSpan(span, {
      id: "d3a4d8ca-158d-5ea3-9c5a-b6e958e0113a",
      parent_id: "5a781271-ad9a-56d0-a696-0536eac4c2f9",
      span_type: "llm_call",
      name: "chat gpt-4.1-mini",
      model: "gpt-4.1-mini-2025-04-14",
      input: [
        { role: "system", content: "You are a travel assistant. Use tools for live data." },
        { role: "user", content: "Plan a day in Paris for tomorrow and check the weather." }
      ],
      output: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_w1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }
        ],
        finish_reason: "tool_call"
      },
      input_tokens: 412,
      output_tokens: 23,
      duration_ms: 1332,
      started_at: "2026-08-20T10:00:00.120Z",
      ended_at: "2026-08-20T10:00:01.452Z",
      // agent_id / agent_role are inherited from fixture 3 by the finalize pass (trace-finalize.test.ts).
      metadata: {
        source: "otel_genai",
        otel: {
          trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
          span_id: "00f067aa0ba902b7",
          parent_span_id: "5fb397be34d26b51",
          kind: "CLIENT",
          status_code: "UNSET",
          service_name: "fixture-app",
          scope: { name: "fixture", version: "1.0" }
        },
        gen_ai: {
          operation: "chat",
          provider: "openai",
          request_model: "gpt-4.1-mini",
          response_id: "chatcmpl-7Qx2",
          finish_reasons: ["tool_call"],
          conversation_id: "conv_8812",
          usage: { cache_read_input_tokens: 256 }
        },
        session_id: "conv_8812",
        attributes: { "server.address": "api.openai.com" },
        resource: { "service.name": "fixture-app" }
      }
    })
    expect(span.metadata.attributes).toEqual({ "server.address": "api.openai.com" })
    expect((span.metadata.otel as Record<string, unknown>).root).toBeUndefined()
    expect(span.metadata.agent).toBeUndefined()
    expectValid(span)
  })

  test("fixture 1b: the companion chat span", () => {
    expectSpan(mapped(F.fixture1b), {
      id: "dff0274e-8e21-51be-bf05-afe43073fac3",
      parent_id: "5a781271-ad9a-56d0-a696-0536eac4c2f9",
      span_type: "llm_call",
      name: "chat gpt-4.1-mini",
      model: "gpt-4.1-mini",
      input_tokens: 745,
      output_tokens: 117,
      duration_ms: 2430,
      started_at: "2026-08-20T10:00:01.720Z",
      ended_at: "2026-08-20T10:00:04.150Z",
      metadata: { source: "otel_genai" }
    })
  })

  test("fixture 2: execute_tool with structured (kvlist) values (row 5)", () => {
    const span = mapped(F.fixture2)
    expectSpan(span, {
      id: "3de20bf4-5e1d-5d7b-8999-ef47f15a9ec9",
      parent_id: "5a781271-ad9a-56d0-a696-0536eac4c2f9",
      span_type: "tool_call",
      name: "execute_tool get_weather",
      input: { city: "Paris" },
      output: { temp_c: 14.5, conditions: "rain" },
      duration_ms: 232,
      started_at: "2026-08-20T10:00:01.470Z",
      ended_at: "2026-08-20T10:00:01.702Z",
      metadata: {
        source: "otel_genai",
        otel: { kind: "INTERNAL", status_code: "UNSET" },
        gen_ai: {
          operation: "execute_tool",
          tool: { name: "get_weather", call_id: "call_w1", type: "function", description: "Current weather for a city" }
        }
      }
    })
    expect((span.metadata.otel as Record<string, unknown>).span_name).toBeUndefined()
    expect(span.metadata.attributes).toBeUndefined()
    expectValid(span)
  })

  test("fixture 3: invoke_agent root with aggregate usage (row 5, aggregate usage)", () => {
    const span = mapped(F.fixture3)
    expectSpan(span, {
      id: "5a781271-ad9a-56d0-a696-0536eac4c2f9",
      parent_id: null,
      span_type: "action",
      name: "invoke_agent TripPlanner",
      model: "gpt-4.1-mini",
      input: [{ role: "user", content: "Plan a day in Paris for tomorrow and check the weather." }],
      output: {
        role: "assistant",
        content:
          "Tomorrow in Paris: light rain, about 14.5°C. Louvre in the morning, covered passages after lunch, Seine dinner cruise.",
        finish_reason: "stop"
      },
      duration_ms: 4200,
      started_at: "2026-08-20T10:00:00.000Z",
      ended_at: "2026-08-20T10:00:04.200Z",
      agent_id: "asst_trip_01",
      agent_role: "TripPlanner",
      metadata: {
        source: "otel_genai",
        aggregate_usage: { input_tokens: 1157, output_tokens: 140 },
        gen_ai: {
          operation: "invoke_agent",
          provider: "openai",
          conversation_id: "conv_8812",
          agent: { id: "asst_trip_01", name: "TripPlanner", description: "Plans trips and checks live conditions" }
        },
        otel: { root: true },
        agent: { is_agent_span: true, own_id: "asst_trip_01", own_role: "TripPlanner" },
        session_id: "conv_8812"
      }
    })
    expect(span.metadata.aggregate_usage).toEqual({ input_tokens: 1157, output_tokens: 140 })
    expectValid(span)
  })

  test("fixture 4: deprecated per-message span events (row 5)", () => {
    const span = mapped(F.fixture4)
    expectSpan(span, {
      id: "99d79c7e-69a5-59b0-b5ee-74e51873b8a4",
      parent_id: null,
      span_type: "llm_call",
      name: "chat claude-3-5-sonnet-20241022",
      model: "claude-3-5-sonnet-20241022",
      input: [
        { role: "system", content: "Answer in one sentence." },
        { role: "user", content: "Why is the sky blue?" }
      ],
      output: {
        role: "assistant",
        content:
          "Air molecules scatter short blue wavelengths of sunlight far more than red ones (Rayleigh scattering).",
        finish_reason: "stop"
      },
      input_tokens: 57,
      output_tokens: 31,
      duration_ms: 2310,
      started_at: "2026-08-20T10:00:00.000Z",
      ended_at: "2026-08-20T10:00:02.310Z",
      metadata: { source: "otel_genai", gen_ai: { provider: "anthropic", finish_reasons: ["end_turn"] } }
    })
    // The message events became input/output, so they are not repeated in metadata.events.
    expect(span.metadata.events).toBeUndefined()
    expectValid(span)
  })

  test("fixture 5: OpenInference LLM span, flattened messages, tool call, cost, session (row 3)", () => {
    const span = mapped(F.fixture5)
    expectSpan(span, {
      id: "aed51b40-4aff-58e6-9250-f9c4d1bbc119",
      parent_id: "2fca8e3d-0a00-589e-9066-709f10612e09",
      span_type: "llm_call",
      name: "ChatCompletion",
      model: "gpt-4o-2024-08-06",
      // llm.invocation_parameters travel with the messages (the request replay sends again).
      input: {
        messages: [
          { role: "system", content: "You are a research assistant." },
          { role: "user", content: "Find the 2024 revenue of ACME Corp." }
        ],
        temperature: 0.2
      },
      output: {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_s1",
            type: "function",
            function: { name: "web_search", arguments: '{"query": "ACME Corp 2024 revenue"}' }
          }
        ]
      },
      input_tokens: 96,
      output_tokens: 21,
      cost: 0.000451,
      duration_ms: 1800,
      started_at: "2026-08-20T10:00:00.050Z",
      ended_at: "2026-08-20T10:00:01.850Z",
      metadata: {
        source: "openinference",
        session_id: "sess-42",
        user_id: "u-981",
        gen_ai: { provider: "openai", usage: { total_tokens: 117 } },
        otel: { status_code: "OK" },
        // OpenInference `metadata` goes onto the trace (conventions/OpenInference.ts), not among the leftovers.
        trace_hints: { tags: ["research"], metadata: { tenant: "eu-1" } },
        attributes: { "llm.provider": "azure", "llm.invocation_parameters": '{"temperature": 0.2}' }
      }
    })
    expectValid(span)
  })

  test("fixture 6: OpenLLMetry legacy LLM span with indexed prompts (row 7)", () => {
    const span = mapped(F.fixture6)
    expectSpan(span, {
      id: "b8278c0e-c058-5c27-8cca-87b75c65030b",
      parent_id: "042fe984-5370-549c-bbd6-59e0d016eb4e",
      span_type: "llm_call",
      name: "openai.chat",
      model: "gpt-4o-mini-2024-07-18",
      input: [
        { role: "system", content: "Summarize in 10 words." },
        { role: "user", content: "OpenTelemetry is an observability framework for cloud-native software." }
      ],
      output: {
        role: "assistant",
        content: "OpenTelemetry standardizes traces, metrics and logs across vendors.",
        finish_reason: "stop"
      },
      input_tokens: 38,
      output_tokens: 12,
      duration_ms: 900,
      started_at: "2026-08-20T10:00:00.200Z",
      ended_at: "2026-08-20T10:00:01.100Z",
      metadata: {
        source: "openllmetry",
        gen_ai: { provider: "openai", usage: { total_tokens: 50 } },
        session_id: "chat-7781",
        user_id: "u-22",
        otel: { scope: { name: "opentelemetry.instrumentation.openai.v1", version: "0.40.2" } },
        trace_hints: { name: "summarize_doc" },
        attributes: { "llm.is_streaming": false }
      }
    })
    expectValid(span)
  })

  test("fixture 7: Traceloop workflow root span (row 6)", () => {
    const span = mapped(F.fixture7)
    expectSpan(span, {
      id: "042fe984-5370-549c-bbd6-59e0d016eb4e",
      parent_id: null,
      span_type: "action",
      name: "summarize_doc.workflow",
      input: { args: ["OpenTelemetry is an observability framework for cloud-native software."], kwargs: {} },
      output: "OpenTelemetry standardizes traces, metrics and logs across vendors.",
      duration_ms: 1250,
      started_at: "2026-08-20T10:00:00.000Z",
      ended_at: "2026-08-20T10:00:01.250Z",
      metadata: {
        source: "openllmetry",
        otel: { root: true },
        trace_hints: { name: "summarize_doc" },
        session_id: "chat-7781"
      }
    })
    // A workflow span repeats its children's usage, but this one carries none.
    expect(span.metadata.aggregate_usage).toBeUndefined()
    expectValid(span)
  })

  test("fixture 8: Vercel AI SDK provider-call span (row 8)", () => {
    const span = mapped(F.fixture8)
    expectSpan(span, {
      id: "5753b7ab-0a4d-5d42-8727-56b17ec73976",
      parent_id: "15c1f98b-fab4-5d47-b305-f181292fc487",
      span_type: "llm_call",
      name: "ai.generateText.doGenerate",
      model: "claude-sonnet-4-5-20250929",
      input: [
        { role: "system", content: "You are a support bot." },
        { role: "user", content: "Reset my password" }
      ],
      output: {
        role: "assistant",
        content: "Open Settings, then Security, and choose Reset password.",
        finish_reason: "stop"
      },
      input_tokens: 31,
      output_tokens: 14,
      duration_ms: 950,
      // ai.telemetry.functionId names the agent (every span of the call carries it).
      agent_id: "support-bot",
      started_at: "2026-08-20T10:00:00.030Z",
      ended_at: "2026-08-20T10:00:00.980Z",
      metadata: {
        source: "vercel_ai",
        gen_ai: { provider: "anthropic.messages", usage: { total_tokens: 45 } },
        session_id: "thread-5521",
        user_id: "u-77"
      }
    })
    expectValid(span)
  })

  test("fixture 9: Pydantic AI legacy tool span, failed, no operation name (row 11)", () => {
    const span = mapped(F.fixture9)
    expectSpan(span, {
      id: "6392c178-857d-592a-bb77-3d487bb3f52e",
      parent_id: "e663539d-1596-51af-9440-73ba9ee0e9f1",
      span_type: "tool_call",
      name: "execute_tool lookup_order",
      input: { order_id: "A-19" },
      duration_ms: 60,
      started_at: "2026-08-20T10:00:00.900Z",
      ended_at: "2026-08-20T10:00:00.960Z",
      error: "app.errors.OrderNotFound: Order 'A-19' not found",
      metadata: {
        source: "pydantic_ai",
        otel: {
          status_code: "ERROR",
          status_message: "Order 'A-19' not found",
          span_name: "running tool",
          failed: true
        },
        gen_ai: { tool: { name: "lookup_order", call_id: "pyd_call_3" } },
        exception: {
          type: "app.errors.OrderNotFound",
          message: "Order 'A-19' not found",
          stacktrace: "Traceback (most recent call last): ...",
          escaped: true
        }
      }
    })
    // The exception event became metadata.exception.
    expect(span.metadata.events).toBeUndefined()
    expectValid(span)
  })

  test("fixture 9's parent: a legacy run span is an agent span with its own identity (row 10)", () => {
    const span = mapped(F.fixture9Parent)
    expect(span.span_type).toBe("action")
    expect(span.agent_id).toBe("support_agent")
    expect(span.agent_role).toBe("support_agent")
    expect(span.metadata).toMatchObject({
      source: "pydantic_ai",
      agent: { is_agent_span: true, own_id: "support_agent" }
    })
  })

  test("fixture 10: LangSmith span for a LangChain chat model run (row 4)", () => {
    const span = mapped(F.fixture10)
    expectSpan(span, {
      id: "6342ae7b-cb2c-57cb-b389-208206266476",
      parent_id: "0fb2c569-700a-5a85-8c72-3666b2605b44",
      span_type: "llm_call",
      name: "ChatOpenAI",
      model: "gpt-4o-mini-2024-07-18",
      input: [{ role: "user", content: "Say hi in French" }],
      output: { role: "assistant", content: "Bonjour !" },
      input_tokens: 25,
      output_tokens: 9,
      duration_ms: 1200,
      started_at: "2026-08-20T10:00:00.010Z",
      ended_at: "2026-08-20T10:00:01.210Z",
      metadata: {
        source: "langsmith",
        otel: { status_code: "OK" },
        gen_ai: { provider: "openai", usage: { total_tokens: 34 } },
        session_id: "thr-300",
        // The LangSmith project id is not a session: it stays an ordinary attribute.
        attributes: { "langsmith.trace.session_id": "9d1c2b3a-4e5f-4a6b-8c7d-0e1f2a3b4c5d" }
      }
    })
    expectValid(span)
  })

  test("trace ids: our UUID and the OTel hex", () => {
    const m = mapSpan(IDS, F.otlpSpan(F.fixture8))!
    expect(m.traceId).toBe("f43d7131-880d-5861-adc7-be0c0ba85f9f")
    expect(m.otelTraceId).toBe("d4cda95b652f4a1592b449d5929fda1b")
    expect(mapSpan(IDS, F.otlpSpan(F.fixture9))!.traceId).toBe("436390fc-cd8f-576e-b5ce-c3f067141391")
    expect(mapSpan(IDS, F.otlpSpan(F.fixture10))!.traceId).toBe("c6d550b3-02ed-5294-b225-834a766b71ba")
  })

  test("the same span mapped twice gives the same row (idempotent re-delivery)", () => {
    for (const c of [F.fixture1, F.fixture3, F.fixture5, F.fixture9]) expect(mapped(c)).toEqual(mapped(c))
  })
})

describe("mapSpan: edge cases", () => {
  test("plan is reasoning", () => {
    const span = mapped(compact({ "gen_ai.operation.name": "plan" }, { name: "plan TripPlanner" }))
    expect(span.span_type).toBe("reasoning")
    expect(span.name).toBe("plan TripPlanner")
  })

  test("embeddings is an llm_call with its input tokens", () => {
    const span = mapped(compact({ "gen_ai.operation.name": "embeddings", "gen_ai.usage.input_tokens": 8 }))
    expect(span.span_type).toBe("llm_call")
    expect(span.input_tokens).toBe(8)
    expect(span.output_tokens).toBeUndefined()
    expect(span.metadata).toMatchObject({ gen_ai: { operation: "embeddings" } })
  })

  test("retrieval is an action", () => {
    expect(mapped(compact({ "gen_ai.operation.name": "retrieval" })).span_type).toBe("action")
  })

  test("an outer AI SDK span keeps its usage as an aggregate", () => {
    const span = mapped(
      compact({ "ai.operationId": "ai.generateText", "ai.usage.inputTokens": 31 }, { name: "ai.generateText" })
    )
    expect(span.span_type).toBe("action")
    expect(span.input_tokens).toBeUndefined()
    expect(span.output_tokens).toBeUndefined()
    expect(span.cost).toBeUndefined()
    expect(span.metadata).toMatchObject({ source: "vercel_ai", aggregate_usage: { input_tokens: 31 } })
  })

  test("a Pydantic AI run span with aggregated usage keeps it as an aggregate only", () => {
    for (const attributes of [
      {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support_agent",
        "gen_ai.aggregated_usage.input_tokens": 120,
        "gen_ai.aggregated_usage.output_tokens": 30
      },
      {
        agent_name: "support_agent",
        "gen_ai.aggregated_usage.input_tokens": 120,
        "gen_ai.aggregated_usage.output_tokens": 30
      }
    ]) {
      const span = mapped(compact(attributes, { name: "invoke_agent support_agent" }))
      expect(span.span_type).toBe("action")
      expect(span.input_tokens).toBeUndefined()
      expect(span.output_tokens).toBeUndefined()
      expect(span.metadata.aggregate_usage).toEqual({ input_tokens: 120, output_tokens: 30 })
      expect(span.agent_id).toBe("support_agent")
    }
  })

  test("a legacy run span (row 10) with plain usage keys: action with aggregate usage", () => {
    const span = mapped(
      compact({
        agent_name: "a",
        model_name: "gpt-4o",
        "gen_ai.usage.input_tokens": 5,
        "gen_ai.request.model": "gpt-4o"
      })
    )
    expect(span.span_type).toBe("action")
    expect(span.input_tokens).toBeUndefined()
    expect(span.metadata.aggregate_usage).toEqual({ input_tokens: 5 })
  })

  test("a failed HTTP client span is an error with the status message", () => {
    const span = mapped(
      compact({ "http.request.method": "GET" }, { kind: 3, status: { code: 2, message: "connect ECONNREFUSED" } })
    )
    expect(span.span_type).toBe("error")
    expect(span.error).toBe("connect ECONNREFUSED")
    expect(span.metadata).toMatchObject({
      source: "generic",
      otel: { failed: true, status_code: "ERROR" },
      attributes: { "http.request.method": "GET" }
    })
  })

  test("the same HTTP span with status 0 is an action without error", () => {
    const span = mapped(compact({ "http.request.method": "GET" }, { kind: 3, status: { code: 0 } }))
    expect(span.span_type).toBe("action")
    expect(span.error).toBeUndefined()
    expect((span.metadata.otel as Record<string, unknown>).failed).toBeUndefined()
  })

  test("langfuse generation beats invoke_agent (row 2 before row 5)", () => {
    const span = mapped(compact({ "langfuse.observation.type": "generation", "gen_ai.operation.name": "invoke_agent" }))
    expect(span.span_type).toBe("llm_call")
    expect(span.metadata.source).toBe("langfuse")
  })

  test("lower-case openinference chain with plain-text input", () => {
    const span = mapped(
      compact({ "openinference.span.kind": "chain", "input.value": "hello", "input.mime_type": "text/plain" })
    )
    expect(span.span_type).toBe("action")
    expect(span.input).toBe("hello")
    expect(span.metadata.source).toBe("openinference")
  })

  test("a Logfire pending_span placeholder is skipped", () => {
    expect(
      mapSpan(
        IDS,
        F.otlpSpan(compact({ "logfire.span_type": "pending_span", "logfire.pending_parent_id": "8899aabbccddeeff" }))
      )
    ).toBeUndefined()
  })

  test("a truncated gen_ai.input.messages string is stored raw, not an error", () => {
    const raw = '[{"role":"user","parts":[{"type":"text","content":"Plan a day in Par'
    const span = mapped(compact({ "gen_ai.operation.name": "chat", "gen_ai.input.messages": raw }))
    expect(span.span_type).toBe("llm_call")
    expect(span.input).toBe(raw)
    expect(span.error).toBeUndefined()
  })

  test("a span whose parent is not stored yet gets the computed parent_id and no agent fields", () => {
    const span = mapped(compact({ "gen_ai.operation.name": "chat" }))
    expect(span.parent_id).toBe(
      mapSpan(IDS, F.otlpSpan(compact({}, { spanId: "8899aabbccddeeff", parentSpanId: "" })))!.span.id
    )
    expect(span.agent_id).toBeUndefined()
    expect(span.parent_agent_id).toBeUndefined()
  })
})

describe("mapSpan: decision table, precedence and normalisation", () => {
  test("the explicit override decides the type; source still names the instrumentation", () => {
    const span = mapped(compact({ "tapedeck.span.type": "fork_point", "gen_ai.operation.name": "chat" }))
    expect(span.span_type).toBe("fork_point")
    expect(span.metadata.source).toBe("otel_genai")
    expect(mapped(compact({ "tapedeck.span.type": "bogus", "gen_ai.operation.name": "chat" })).span_type).toBe(
      "llm_call"
    )
  })

  test("an unknown operation name falls through to later rows", () => {
    expect(
      mapped(
        compact({
          "gen_ai.operation.name": "agent_step",
          "traceloop.span.kind": "tool",
          "traceloop.entity.name": "search"
        })
      ).span_type
    ).toBe("tool_call")
    expect(mapped(compact({ "gen_ai.operation.name": "chain" })).span_type).toBe("action")
  })

  test("a failed execute_tool keeps its type and carries the error", () => {
    const span = mapped(
      compact(
        { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "error.type": "TimeoutError" },
        { name: "execute_tool t" }
      )
    )
    expect(span.span_type).toBe("tool_call")
    expect(span.error).toBe("TimeoutError")
  })

  test("error string: type and message from the last exception event, else error.type and the status message", () => {
    const span = mapped(
      compact(
        { "error.type": "_OTHER" },
        {
          status: { code: 2, message: "boom" },
          events: [
            {
              name: "exception",
              timeUnixNano: "1787220000100000000",
              attributes: { "exception.type": "First", "exception.message": "first" }
            },
            {
              name: "exception",
              timeUnixNano: "1787220000200000000",
              attributes: { "exception.type": "Second", "exception.message": "second" }
            }
          ]
        }
      )
    )
    expect(span.error).toBe("Second: second")
    expect((span.metadata.events as Array<Record<string, unknown>>).map((e) => e.name)).toEqual(["exception"])
    expect(mapped(compact({ "error.type": "_OTHER" }, { status: { code: 2, message: "boom" } })).error).toBe(
      "_OTHER: boom"
    )
    expect(mapped(compact({ "langfuse.observation.level": "ERROR" })).error).toBe("error")
    expect(
      mapped(compact({ "langfuse.observation.level": "ERROR", "langfuse.observation.status_message": "bad" })).error
    ).toBe("bad")
  })

  test("an exception event alone (status UNSET) is a handled exception: no error, event kept", () => {
    const span = mapped(
      compact(
        {},
        {
          events: [
            {
              name: "exception",
              timeUnixNano: "1787220000100000000",
              attributes: { "exception.type": "Retry", "exception.message": "429" }
            }
          ]
        }
      )
    )
    expect(span.span_type).toBe("action")
    expect(span.error).toBeUndefined()
    expect(span.metadata.events).toEqual([
      {
        name: "exception",
        time: "2026-08-20T10:00:00.100Z",
        attributes: { "exception.type": "Retry", "exception.message": "429" }
      }
    ])
  })

  test("an AI SDK tool span is renamed after its tool, keeping the original name", () => {
    const span = mapped(
      compact(
        {
          "ai.operationId": "ai.toolCall",
          "ai.toolCall.name": "search",
          "ai.toolCall.id": "c1",
          "ai.toolCall.args": '{"q":"x"}',
          "ai.toolCall.result": '{"hits":3}'
        },
        { name: "ai.toolCall" }
      )
    )
    expect(span.span_type).toBe("tool_call")
    expect(span.name).toBe("execute_tool search")
    expect(span.input).toEqual({ q: "x" })
    expect(span.output).toEqual({ hits: 3 })
    expect(span.metadata).toMatchObject({
      source: "vercel_ai",
      otel: { span_name: "ai.toolCall" },
      gen_ai: { tool: { name: "search", call_id: "c1" } }
    })
  })

  test("an empty span name is built from the operation and the model", () => {
    expect(
      mapped(compact({ "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o" }, { name: "  " })).name
    ).toBe("chat gpt-4o")
    expect(mapped(compact({}, { name: "" })).name).toBe("span")
  })

  test("model precedence and provider", () => {
    const span = mapped(
      compact({ "gen_ai.request.model": "gpt-4", "gen_ai.response.model": "gpt-4-0613", "llm.model_name": "other" })
    )
    expect(span.model).toBe("gpt-4-0613")
    expect(mapped(compact({ "gen_ai.operation.name": "chat", "ai.model.id": "m".repeat(300) })).model).toBe(
      "m".repeat(100)
    )
  })

  test("cost: langfuse cost details, then gen_ai.usage.cost, llm.cost.total, operation.cost, prompt + completion", () => {
    const llm = { "gen_ai.operation.name": "chat" }
    expect(
      mapped(compact({ ...llm, "langfuse.observation.cost_details": '{"total": 0.5}', "gen_ai.usage.cost": 9 })).cost
    ).toBe(0.5)
    expect(mapped(compact({ ...llm, "langfuse.observation.cost_details": { input: 0.25, output: 0.5 } })).cost).toBe(
      0.75
    )
    expect(mapped(compact({ ...llm, "operation.cost": 0.01 })).cost).toBe(0.01)
    expect(mapped(compact({ ...llm, "llm.cost.prompt": 0.25, "llm.cost.completion": 0.5 })).cost).toBe(0.75)
    expect(mapped(compact({ ...llm, "gen_ai.usage.cost": -1 })).cost).toBeUndefined()
    expect(mapped(compact({ ...llm, "gen_ai.usage.cost": Number.NaN })).cost).toBeUndefined()
  })

  test("tokens: integers from numbers or numeric strings, capped at 1e12; negatives are absent", () => {
    const llm = { "gen_ai.operation.name": "chat" }
    expect(
      mapped(compact({ ...llm, "gen_ai.usage.input_tokens": "42", "gen_ai.usage.output_tokens": 5e15 }))
    ).toMatchObject({ input_tokens: 42, output_tokens: 1e12 })
    expect(
      mapped(compact({ ...llm, "gen_ai.usage.input_tokens": -3, "gen_ai.usage.prompt_tokens": 7 })).input_tokens
    ).toBe(7)
    expect(
      mapped(compact({ ...llm, "langfuse.observation.usage_details": '{"input": 11, "output": 4}' }))
    ).toMatchObject({ input_tokens: 11, output_tokens: 4 })
  })

  test("times: milliseconds, rounding, no end, end before start", () => {
    const t = (start: string, end: string) => mapped(compact({}, { startTimeUnixNano: start, endTimeUnixNano: end }))
    expect(t("1787220000000000000", "1787220000001500000").duration_ms).toBe(2)
    expect(t("1787220000000400000", "1787220000001000000").duration_ms).toBe(1)
    const open = t("1787220000000000000", "0")
    expect(open.ended_at).toBeUndefined()
    expect(open.duration_ms).toBeUndefined()
    const backwards = t("1787220001000000000", "1787220000000000000")
    expect(backwards.duration_ms).toBe(0)
    expect(t("99999999999999999999999", "0").started_at).toBe("9999-12-31T23:59:59.999Z")
  })

  test("root and local root flags (Traces)", () => {
    const otel = (c: F.CompactSpan) => mapped(c).metadata.otel as Record<string, unknown>
    expect(otel(compact({}, { parentSpanId: "" })).root).toBe(true)
    expect(otel(compact({}, { flags: 0x301 })).local_root).toBe(true)
    expect(otel(compact({}, { flags: 0x301 })).flags).toBe(0x301)
    expect(otel(compact({}, { flags: 0x100 })).local_root).toBeUndefined()
    expect(otel(compact({}, { flags: 0x300, parentSpanId: "" })).local_root).toBeUndefined()
  })

  test("agent identity (Agents): CrewAI role, Traceloop agent, baggage on a child, opaque id with name as role", () => {
    expect(
      mapped(
        compact({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "a1", "gen_ai.agent.name": "Planner" })
      )
    ).toMatchObject({ agent_id: "a1", agent_role: "Planner" })
    const traceloop = mapped(compact({ "traceloop.span.kind": "agent", "traceloop.entity.name": "writer" }))
    expect(traceloop).toMatchObject({
      agent_id: "writer",
      agent_role: "writer",
      metadata: { agent: { is_agent_span: true } }
    })
    const child = mapped(compact({ "gen_ai.operation.name": "chat", "gen_ai.agent.name": "support" }))
    expect(child).toMatchObject({
      agent_id: "support",
      agent_role: "support",
      metadata: { agent: { is_agent_span: false, own_id: "support" } }
    })
    // traceloop.entity.name names an agent only on agent spans.
    expect(mapped(compact({ "traceloop.span.kind": "task", "traceloop.entity.name": "step" })).agent_id).toBeUndefined()
  })

  test("session, user, tags, trace hints and environment", () => {
    const span = mapped(
      compact(
        {
          "langfuse.trace.name": "support flow",
          "langfuse.trace.input": '{"q":1}',
          "langfuse.trace.output": "done",
          "langfuse.trace.tags": ["a", "b"],
          "langsmith.span.tags": "b, c",
          "langfuse.user.id": "u1",
          "langsmith.trace.session_id": "project",
          "langsmith.metadata.conversation_id": "conv"
        },
        { resource: { "service.name": "svc", "session.id": "res-session", "deployment.environment.name": "sandbox" } }
      )
    )
    expect(span.metadata).toMatchObject({
      session_id: "conv",
      user_id: "u1",
      otel: { service_name: "svc" },
      trace_hints: {
        name: "support flow",
        input: { q: 1 },
        output: "done",
        tags: ["a", "b", "c"],
        resource_session_id: "res-session",
        environment: "sandbox"
      },
      resource: { "service.name": "svc", "session.id": "res-session", "deployment.environment.name": "sandbox" }
    })
  })

  test("OTel parts: tool responses split out, reasoning, images, rich content", () => {
    const messages = [
      {
        role: "assistant",
        parts: [
          { type: "reasoning", content: "think" },
          { type: "tool_call", id: "c1", name: "f", arguments: '{"a":1}' }
        ]
      },
      { role: "user", parts: [{ type: "tool_call_response", id: "c1", response: { ok: true } }] },
      {
        role: "user",
        parts: [
          { type: "tool_call_response", id: "c2", result: "plain" },
          { type: "text", content: "next" }
        ]
      },
      {
        role: "user",
        parts: [
          { type: "text", content: "look" },
          { type: "uri", modality: "image", uri: "https://x/y.png" },
          { type: "blob", modality: "image", mime_type: "image/jpeg", content: "AAAA" },
          { type: "file", modality: "document", file_id: "f1" }
        ]
      },
      {
        role: "user",
        parts: [
          { type: "text", content: "a" },
          { type: "text", content: "b" }
        ]
      }
    ]
    const span = mapped(
      compact({
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": messages,
        "gen_ai.system_instructions": "Be brief."
      })
    )
    expect(span.input).toEqual([
      { role: "system", content: "Be brief." },
      {
        role: "assistant",
        content: null,
        reasoning: "think",
        tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: '{"a":1}' } }]
      },
      { role: "tool", tool_call_id: "c1", content: '{"ok":true}' },
      { role: "tool", tool_call_id: "c2", content: "plain" },
      { role: "user", content: "next" },
      {
        role: "user",
        content: [
          { type: "text", text: "look" },
          { type: "image_url", image_url: { url: "https://x/y.png" } },
          { type: "image_url", image_url: { url: "data:image/jpeg;base64,AAAA" } },
          { type: "file", modality: "document", file_id: "f1" }
        ]
      },
      { role: "user", content: "a\nb" }
    ])
  })

  test("several output choices become an array", () => {
    const out = [
      { role: "assistant", parts: [{ type: "text", content: "one" }], finish_reason: "stop" },
      { role: "assistant", parts: [{ type: "text", content: "two" }], finish_reason: "length" }
    ]
    expect(
      mapped(compact({ "gen_ai.operation.name": "chat", "gen_ai.output.messages": JSON.stringify(out) })).output
    ).toEqual([
      { role: "assistant", content: "one", finish_reason: "stop" },
      { role: "assistant", content: "two", finish_reason: "length" }
    ])
  })

  test("system instructions are not prepended when the input has a system message", () => {
    const input = [
      { role: "system", parts: [{ type: "text", content: "S" }] },
      { role: "user", parts: [{ type: "text", content: "U" }] }
    ]
    expect(
      mapped(
        compact({
          "gen_ai.operation.name": "chat",
          "gen_ai.input.messages": input,
          "gen_ai.system_instructions": [{ type: "text", content: "X" }]
        })
      ).input
    ).toEqual([
      { role: "system", content: "S" },
      { role: "user", content: "U" }
    ])
  })

  test("AI SDK messages: tool calls, tool results, several text parts, images", () => {
    const prompt = [
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b" }
        ]
      },
      { role: "assistant", content: [{ type: "tool-call", toolCallId: "t1", toolName: "f", input: { x: 1 } }] },
      {
        role: "tool",
        content: [{ type: "tool-result", toolCallId: "t1", toolName: "f", output: { type: "json", value: 2 } }]
      },
      {
        role: "user",
        content: [
          { type: "text", text: "see" },
          { type: "image", image: "https://i" }
        ]
      }
    ]
    const span = mapped(
      compact({
        "ai.operationId": "ai.streamText.doStream",
        "ai.prompt.messages": JSON.stringify(prompt),
        "ai.response.toolCalls": '[{"toolCallType":"function","toolCallId":"t2","toolName":"g","args":"{}"}]',
        "ai.response.reasoning": "hmm"
      })
    )
    expect(span.span_type).toBe("llm_call")
    expect(span.input).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b" }
        ]
      },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "t1", type: "function", function: { name: "f", arguments: '{"x":1}' } }]
      },
      { role: "tool", tool_call_id: "t1", content: "2" }, // the AI SDK output wrapper is unwrapped
      {
        role: "user",
        content: [
          { type: "text", text: "see" },
          { type: "image", image: "https://i" }
        ]
      }
    ])
    expect(span.output).toEqual({
      role: "assistant",
      content: null,
      reasoning: "hmm",
      tool_calls: [{ id: "t2", type: "function", function: { name: "g", arguments: "{}" } }]
    })
  })

  test("OpenLLMetry indexed tool calls and JSON content parts", () => {
    const span = mapped(
      compact({
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": '[{"type":"text","text":"hi"}]',
        "gen_ai.prompt.1.role": "tool",
        "gen_ai.prompt.1.content": "42",
        "gen_ai.prompt.1.tool_call_id": "k1",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.0.id": "k2",
        "gen_ai.completion.0.tool_calls.0.name": "f",
        "gen_ai.completion.0.tool_calls.0.arguments": "{}"
      })
    )
    expect(span.input).toEqual([
      { role: "user", content: [{ type: "text", text: "hi" }] },
      { role: "tool", content: "42", tool_call_id: "k1" }
    ])
    expect(span.output).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "k2", type: "function", function: { name: "f", arguments: "{}" } }]
    })
  })

  test("OpenInference multimodal contents and legacy prompts/choices", () => {
    const span = mapped(
      compact({
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "what is this?",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.input_messages.0.message.contents.1.message_content.image.image.url": "https://img",
        "llm.choices.0.completion.text": "a cat"
      })
    )
    expect(span.input).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "what is this?" },
          { type: "image_url", image_url: { url: "https://img" } }
        ]
      }
    ])
    expect(span.output).toBe("a cat")
    const legacy = mapped(
      compact({
        "openinference.span.kind": "LLM",
        "llm.prompts.0.prompt.text": "p0",
        "llm.prompts.1.prompt.text": "p1"
      })
    )
    expect(legacy.input).toEqual(["p0", "p1"])
  })

  test("LangChain tool calls and plain-text gen_ai.prompt", () => {
    const prompt = {
      messages: [
        {
          lc: 1,
          type: "constructor",
          id: ["langchain", "schema", "messages", "SystemMessage"],
          kwargs: { content: "S" }
        },
        {
          lc: 1,
          type: "constructor",
          id: ["langchain", "schema", "messages", "AIMessage"],
          kwargs: { content: "", tool_calls: [{ id: "x", name: "f", args: { a: 1 } }] }
        },
        {
          lc: 1,
          type: "constructor",
          id: ["langchain", "schema", "messages", "ToolMessage"],
          kwargs: { content: "r", tool_call_id: "x" }
        }
      ]
    }
    expect(mapped(compact({ "langsmith.span.kind": "llm", "gen_ai.prompt": JSON.stringify(prompt) })).input).toEqual([
      { role: "system", content: "S" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "x", type: "function", function: { name: "f", arguments: '{"a":1}' } }]
      },
      { role: "tool", content: "r", tool_call_id: "x" }
    ])
    expect(mapped(compact({ "gen_ai.operation.name": "chat", "gen_ai.prompt": "hello there" })).input).toBe(
      "hello there"
    )
  })

  test("Semantic Kernel content events and the operation-details event", () => {
    const sk = mapped(
      compact(
        { "gen_ai.operation.name": "chat" },
        {
          events: [
            {
              name: "gen_ai.content.prompt",
              timeUnixNano: "1787220000000000000",
              attributes: { "gen_ai.prompt": '[{"role":"user","content":"hi"}]' }
            },
            {
              name: "gen_ai.content.completion",
              timeUnixNano: "1787220000000000000",
              attributes: { "gen_ai.completion": '[{"role":"assistant","content":"yo"}]' }
            }
          ]
        }
      )
    )
    expect(sk.input).toEqual([{ role: "user", content: "hi" }])
    expect(sk.output).toEqual({ role: "assistant", content: "yo" })
    expect(sk.metadata.events).toBeUndefined()
    const details = mapped(
      compact(
        { "gen_ai.operation.name": "chat" },
        {
          events: [
            {
              name: "gen_ai.client.inference.operation.details",
              timeUnixNano: "1787220000000000000",
              attributes: {
                "gen_ai.input.messages": [{ role: "user", parts: [{ type: "text", content: "q" }] }],
                "gen_ai.output.messages": [
                  { role: "assistant", parts: [{ type: "text", content: "a" }], finish_reason: "stop" }
                ]
              }
            }
          ]
        }
      )
    )
    expect(details.input).toEqual([{ role: "user", content: "q" }])
    expect(details.output).toEqual({ role: "assistant", content: "a", finish_reason: "stop" })
  })

  test("Pydantic AI run span: all_messages as input, final_result as output", () => {
    const span = mapped(
      compact({
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "a",
        "pydantic_ai.all_messages": JSON.stringify([{ role: "user", parts: [{ type: "text", content: "hi" }] }]),
        final_result: "bye"
      })
    )
    expect(span.input).toEqual([{ role: "user", content: "hi" }])
    expect(span.output).toBe("bye")
  })

  test("values are made storable: NUL, lone surrogates, deep nesting, non-finite numbers, oversized input", () => {
    let deep: unknown = "leaf"
    for (let i = 0; i < 200; i++) deep = [deep]
    const span = mapped(
      compact(
        {
          "gen_ai.operation.name": "chat",
          "weird\u0000key": "a\u0000b\uD800c",
          nested: deep,
          nan: Number.NaN,
          "input.value": "x".repeat(2_000_000)
        },
        { name: "bad\u0000name\uDC00" }
      )
    )
    expectValid(span)
    expect(span.name).toBe("bad\uFFFDname\uFFFD")
    expect((span.metadata.attributes as Record<string, unknown>)["weird\uFFFDkey"]).toBe("a\uFFFDb\uFFFDc")
    expect((span.metadata.attributes as Record<string, unknown>).nan).toBe("NaN")
    expect(typeof span.input).toBe("string")
    expect((span.input as string).length).toBe(1_048_576)
    expect(span.metadata.truncated).toEqual(["input"])
  })

  test("the remaining attributes are size-capped, keeping what fits", () => {
    const attributes: Record<string, unknown> = { "gen_ai.operation.name": "chat", small: "kept" }
    for (let i = 0; i < 40; i++) attributes[`big.${i}`] = "y".repeat(5000)
    const span = mapped(compact(attributes))
    expectValid(span)
    const kept = span.metadata.attributes as Record<string, unknown>
    expect(kept.small).toBe("kept")
    expect(Object.keys(kept).length).toBeLessThan(41)
    expect(span.metadata.truncated).toEqual(["attributes"])
    expect(JSON.stringify(span.metadata).length).toBeLessThan(100_000)
  })

  test("an attribute named __proto__ is kept as data", () => {
    const attributes = JSON.parse('{"__proto__": {"polluted": true}, "gen_ai.operation.name": "chat"}') as Record<
      string,
      unknown
    >
    const span = mapped(compact(attributes))
    expect(Object.keys(span.metadata.attributes as object)).toEqual(["__proto__"])
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })
})

/** Keys of the conventions the mapper reads, plus indexed keys and strays. */
const KEYS = [
  "tapedeck.span.type",
  "langfuse.observation.type",
  "openinference.span.kind",
  "langsmith.span.kind",
  "gen_ai.operation.name",
  "traceloop.span.kind",
  "llm.request.type",
  "ai.operationId",
  "operation.name",
  "mcp.method.name",
  "agent_name",
  "pydantic_ai.all_messages",
  "final_result",
  "all_messages_events",
  "gen_ai.tool.name",
  "gen_ai.tool.call.id",
  "ai.toolCall.name",
  "tool.name",
  "gen_ai.input.messages",
  "gen_ai.output.messages",
  "gen_ai.system_instructions",
  "llm.input_messages.0.message.role",
  "llm.input_messages.0.message.content",
  "llm.input_messages.1.message.contents.0.message_content.type",
  "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
  "llm.prompts.0.prompt.text",
  "llm.choices.0.completion.text",
  "gen_ai.prompt.0.content",
  "gen_ai.prompt.0.role",
  "gen_ai.prompt.0.tool_calls.0.arguments",
  "gen_ai.completion.0.content",
  "gen_ai.usage.input_tokens",
  "gen_ai.usage.output_tokens",
  "gen_ai.usage.prompt_tokens",
  "gen_ai.usage.completion_tokens",
  "llm.token_count.prompt",
  "llm.token_count.completion",
  "ai.usage.inputTokens",
  "ai.usage.tokens",
  "gen_ai.aggregated_usage.input_tokens",
  "gen_ai.aggregated_usage.cost",
  "gen_ai.usage.cost",
  "llm.cost.total",
  "llm.cost.prompt",
  "operation.cost",
  "langfuse.observation.cost_details",
  "langfuse.observation.usage_details",
  "gen_ai.request.model",
  "gen_ai.response.model",
  "llm.model_name",
  "ai.model.id",
  "langfuse.observation.model.name",
  "gen_ai.provider.name",
  "gen_ai.system",
  "llm.provider",
  "langfuse.observation.input",
  "langfuse.observation.output",
  "gen_ai.tool.call.arguments",
  "gen_ai.tool.call.result",
  "ai.toolCall.args",
  "ai.toolCall.result",
  "tool_arguments",
  "tool_response",
  "input.value",
  "input.mime_type",
  "output.value",
  "output.mime_type",
  "traceloop.entity.input",
  "traceloop.entity.output",
  "traceloop.entity.name",
  "ai.prompt",
  "ai.prompt.messages",
  "ai.response.text",
  "ai.response.object",
  "ai.response.toolCalls",
  "gen_ai.prompt",
  "gen_ai.completion",
  "events",
  "error.type",
  "langfuse.observation.level",
  "langfuse.observation.status_message",
  "gen_ai.agent.id",
  "gen_ai.agent.name",
  "agent.name",
  "session.id",
  "gen_ai.conversation.id",
  "langsmith.metadata.thread_id",
  "user.id",
  "langfuse.trace.name",
  "langfuse.trace.input",
  "langfuse.trace.tags",
  "langsmith.span.tags",
  "tag.tags",
  "langfuse.environment",
  "gen_ai.response.finish_reasons",
  "logfire.span_type",
  "__proto__",
  "constructor",
  "toString",
  "x"
]
const ENUMS = [
  "chat",
  "execute_tool",
  "invoke_agent",
  "plan",
  "embeddings",
  "LLM",
  "AGENT",
  "chain",
  "tool",
  "agent",
  "workflow",
  "generation",
  "llm",
  "ai.generateText",
  "ai.generateText.doGenerate",
  "ai.toolCall",
  "tools/call",
  "ERROR",
  "application/json",
  "text/plain",
  "fork_point",
  "tool_result",
  "pending_span",
  "span"
]

const nasty = fc.oneof(
  fc.string(),
  fc.fullUnicodeString({ maxLength: 20 }),
  fc.constantFrom(
    "\u0000",
    "a\uD800",
    "\uDC00z",
    "",
    " ",
    "{",
    "[",
    '"x"',
    '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]'
  )
)
const leaf = fc.oneof(
  nasty,
  fc.constantFrom(...ENUMS),
  fc.json({ maxDepth: 3 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, -1, 1e13, 2 ** 60)
)
const { value: anyValue } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.constantFrom(...KEYS), fc.string()), tie("value"), { maxKeys: 4 })
  )
}))
const deepValue = fc.integer({ min: 60, max: 150 }).map((depth) => {
  let v: unknown = "leaf"
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { k: v }
  return v
})
const attributes = fc.dictionary(fc.constantFrom(...KEYS), fc.oneof(anyValue, anyValue, deepValue), { maxKeys: 25 })
const event = fc.record({
  name: fc.constantFrom(
    "exception",
    "gen_ai.user.message",
    "gen_ai.choice",
    "gen_ai.content.prompt",
    "gen_ai.content.completion",
    "gen_ai.client.inference.operation.details",
    "other"
  ),
  timeUnixNano: fc.constantFrom("0", "1787220000000000000", "x"),
  attributes: fc.dictionary(
    fc.constantFrom(
      "content",
      "message",
      "index",
      "role",
      "tool_calls",
      "exception.type",
      "exception.message",
      "gen_ai.prompt",
      "gen_ai.completion",
      "gen_ai.input.messages",
      "gen_ai.output.messages"
    ),
    anyValue,
    { maxKeys: 4 }
  )
})
const hex = (n: number) => fc.uint8Array({ minLength: n, maxLength: n }).map((b) => Buffer.from(b).toString("hex"))
const otlp: fc.Arbitrary<OtlpSpan> = fc.record({
  traceId: hex(16),
  spanId: hex(8),
  parentSpanId: fc.option(hex(8), { nil: null }),
  name: nasty,
  kind: fc.integer({ min: -1, max: 7 }),
  startTimeUnixNano: fc.oneof(fc.bigInt({ min: 0n, max: 10n ** 21n }).map(String), fc.constantFrom("", "abc", "0")),
  endTimeUnixNano: fc.oneof(fc.bigInt({ min: 0n, max: 10n ** 21n }).map(String), fc.constantFrom("", "0")),
  attributes,
  events: fc.array(event, { maxLength: 4 }),
  status: fc.record({ code: fc.integer({ min: 0, max: 3 }), message: nasty }),
  flags: fc.nat({ max: 0xffff }),
  traceState: fc.constantFrom("", "a=b"),
  resource: fc.dictionary(
    fc.constantFrom("service.name", "session.id", "deployment.environment.name", "host.name"),
    anyValue,
    { maxKeys: 3 }
  ),
  scope: fc.record({ name: fc.string(), version: fc.string(), attributes: fc.constant({}) }),
  idEncoding: fc.constantFrom("hex" as const, "base64" as const)
})

const SPAN_TYPES = ["llm_call", "tool_call", "tool_result", "reasoning", "action", "error", "fork_point"]

describe("mapSpan: properties", () => {
  test("never throws on arbitrary attribute mixes; every span is a valid, storable API span within the limits", () => {
    fc.assert(
      fc.property(otlp, (span) => {
        const m = mapSpan(IDS, span)
        if (span.attributes["logfire.span_type"] === "pending_span") {
          expect(m).toBeUndefined()
          return
        }
        expect(m).toBeDefined()
        const s = m!.span
        expect(SPAN_TYPES).toContain(s.span_type)
        expect(s.metadata.mapping_error).toBeUndefined()
        expect(s.name.length).toBeLessThanOrEqual(SPAN_TEXT_LIMITS.name)
        if (s.model !== undefined) expect(s.model.length).toBeLessThanOrEqual(SPAN_TEXT_LIMITS.model)
        for (const field of ["agent_id", "agent_role", "parent_agent_id"] as const) {
          if (s[field] !== undefined) expect(s[field]!.length).toBeLessThanOrEqual(500)
        }
        if (s.error !== undefined) expect(s.error.length).toBeLessThanOrEqual(SPAN_TEXT_LIMITS.error)
        for (const field of ["input_tokens", "output_tokens", "duration_ms"] as const) {
          const n = s[field]
          if (n !== undefined) {
            expect(Number.isInteger(n)).toBe(true)
            expect(n).toBeGreaterThanOrEqual(0)
            expect(n).toBeLessThanOrEqual(1e12)
          }
        }
        if (s.cost !== undefined) {
          expect(Number.isFinite(s.cost)).toBe(true)
          expect(s.cost).toBeGreaterThanOrEqual(0)
        }
        expectValid(s)
        // jsonb round trip: what PostgreSQL stores is what we produced.
        expect(JSON.parse(JSON.stringify(s.metadata))).toEqual(s.metadata)
      }),
      { numRuns: Number(process.env.MAP_RUNS ?? 1500) }
    )
  })

  test("mapping is deterministic", () => {
    fc.assert(
      fc.property(otlp, (span) => {
        expect(mapSpan(IDS, span)).toEqual(mapSpan(IDS, span))
      }),
      { numRuns: 200 }
    )
  })

  test("MAX_JSON_DEPTH is what the storage check enforces", () => {
    expect(MAX_JSON_DEPTH).toBe(64)
  })
})

describe("mapSpan: a model call's tool definitions are stored once", () => {
  const openAi = [
    { type: "function", function: { name: "search", description: "finds", parameters: { type: "object" } } },
    { type: "function", function: { name: "fetch" } }
  ]
  const chat = (definitions: unknown, extra: Record<string, unknown> = {}) =>
    compact({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "gpt-4o",
      "gen_ai.input.messages": JSON.stringify([{ role: "user", parts: [{ type: "text", content: "hi" }] }]),
      "gen_ai.tool.definitions": JSON.stringify(definitions),
      ...extra
    })

  test("in the Chat Completions form: in the input's tools, not repeated in metadata.attributes", () => {
    const span = mapped(chat(openAi, { "server.address": "api.openai.com" }))
    expect(span.span_type).toBe("llm_call")
    expect((span.input as { tools: unknown }).tools).toEqual(openAi)
    expect(span.metadata.attributes).toEqual({ "server.address": "api.openai.com" })
  })

  test("in another form (some of it not in the input), or on a span that is not a model call: kept in metadata", () => {
    const anthropic = [{ name: "search", description: "finds", input_schema: { type: "object" }, cache_control: {} }]
    const kept = mapped(chat(anthropic))
    expect((kept.input as { tools: Array<unknown> }).tools.length).toBe(1)
    expect((kept.metadata.attributes as Record<string, unknown>)["gen_ai.tool.definitions"]).toBe(
      JSON.stringify(anthropic)
    )
    const agent = mapped(
      compact({ "gen_ai.operation.name": "invoke_agent", "gen_ai.tool.definitions": JSON.stringify(openAi) })
    )
    expect(agent.span_type).not.toBe("llm_call")
    expect((agent.metadata.attributes as Record<string, unknown>)["gen_ai.tool.definitions"]).toBe(
      JSON.stringify(openAi)
    )
  })
})
