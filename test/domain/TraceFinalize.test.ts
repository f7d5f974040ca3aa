import { describe, expect, test } from "bun:test"
import { createHash } from "node:crypto"
import { FastCheck as fc } from "effect"

import { mapSpan } from "#src/domain/genai/MapSpan"
import { accountSpanIds } from "#layers/ingest/OtlpIds"
import { finalizeTrace, type StoredSpan, type TraceFinalization } from "#layers/ingest/TraceFinalize"
import * as F from "../fixtures/otlp/GenAiFixtures.ts"

const IDS = accountSpanIds(F.ACME)

/** The span as the ingestion stores it and reloads it (a JSON round trip, as through jsonb). */
const stored = (c: F.CompactSpan): StoredSpan => JSON.parse(JSON.stringify(mapSpan(IDS, F.otlpSpan(c))!.span)) as StoredSpan

const compact = (spanId: string, parentSpanId: string, attributes: Record<string, unknown>, over: Partial<F.CompactSpan> = {}): F.CompactSpan => ({
  traceId: "0123456789abcdef0123456789abcdef", spanId, parentSpanId, name: spanId, kind: 1,
  startTimeUnixNano: "1787220000000000000", endTimeUnixNano: "1787220001000000000", attributes, ...over
})

/** What the database holds after the updates (COALESCE semantics: absent fields are kept). */
const apply = (spans: ReadonlyArray<StoredSpan>, result: TraceFinalization): Array<StoredSpan> =>
  spans.map((s) => {
    const u = result.spanUpdates.find((x) => x.id === s.id)
    if (u === undefined) return s
    const { id: _, ...fields } = u
    return { ...s, ...fields }
  })

/** The database's token total: input + output over every span. */
const totalTokens = (spans: ReadonlyArray<StoredSpan>) => spans.reduce((t, s) => t + (s.input_tokens ?? 0) + (s.output_tokens ?? 0), 0)
const totalCost = (spans: ReadonlyArray<StoredSpan>) => spans.reduce((t, s) => t + (s.cost ?? 0), 0)

const permutations = <A>(xs: ReadonlyArray<A>): Array<Array<A>> =>
  xs.length <= 1 ? [[...xs]] : xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]))

const updateOf = (result: TraceFinalization, id: string) => result.spanUpdates.find((u) => u.id === id)

describe("finalizeTrace: the fixture traces", () => {
  const A = [F.fixture1, F.fixture1b, F.fixture2, F.fixture3].map(stored)

  test("trace A, in every arrival order: completed, root name/input/output, session, totals without the aggregate", () => {
    for (const order of permutations(A)) {
      const result = finalizeTrace(order)
      expect(result.trace).toEqual({
        name: "invoke_agent TripPlanner",
        status: "completed",
        input: [{ role: "user", content: "Plan a day in Paris for tomorrow and check the weather." }],
        output: {
          role: "assistant",
          content: "Tomorrow in Paris: light rain, about 14.5°C. Louvre in the morning, covered passages after lunch, Seine dinner cruise.",
          finish_reason: "stop"
        },
        sessionId: "conv_8812",
        startedAt: "2026-08-20T10:00:00.000Z",
        endedAt: "2026-08-20T10:00:04.200Z",
        metadata: { otel: { trace_id: F.TRACE_A }, service_name: "fixture-app" },
        environment: "production"
      })
      const after = apply(order, result)
      // 1297 = 412 + 23 + 745 + 117; the root's aggregate 1157 + 140 is not added again.
      expect(totalTokens(after)).toBe(1297)
      expect(totalCost(after)).toBe(0)
    }
  })

  test("trace A: fixtures 1, 1b and 2 inherit the agent of fixture 3; the root is unchanged", () => {
    const result = finalizeTrace(A)
    for (const id of [A[0]!.id, A[1]!.id, A[2]!.id]) {
      expect(updateOf(result, id)).toEqual({ id, agent_id: "asst_trip_01", agent_role: "TripPlanner" })
    }
    expect(updateOf(result, A[3]!.id)).toBeUndefined()
    expect(result.spanUpdates).toHaveLength(3)
    // A second pass over the updated rows changes nothing.
    expect(finalizeTrace(apply(A, result)).spanUpdates).toEqual([])
  })

  test("trace A before fixture 3 arrives: running, no name, no end, no inheritance yet", () => {
    const result = finalizeTrace(A.slice(0, 3))
    expect(result.trace).toMatchObject({ name: null, status: "running", endedAt: null, startedAt: "2026-08-20T10:00:00.120Z", sessionId: "conv_8812" })
    expect(result.spanUpdates).toEqual([])
    // The llm_call fallbacks give the running trace an input and output.
    expect(result.trace.input).toEqual(A[0]!.input)
  })

  test("trace B: a single root llm_call", () => {
    const b = [stored(F.fixture4)]
    const result = finalizeTrace(b)
    expect(result.trace).toMatchObject({ name: "chat claude-3-5-sonnet-20241022", status: "completed", sessionId: null, endedAt: "2026-08-20T10:00:02.310Z" })
    expect(totalTokens(apply(b, result))).toBe(88)
  })

  test("trace C: the LLM span inherits the researcher agent; session and cost", () => {
    const c = [stored(F.fixture5), stored(F.fixture5Parent)]
    const result = finalizeTrace(c)
    expect(updateOf(result, "aed51b40-4aff-58e6-9250-f9c4d1bbc119")).toEqual({ id: "aed51b40-4aff-58e6-9250-f9c4d1bbc119", agent_id: "researcher", agent_role: "researcher" })
    expect(result.trace).toMatchObject({ status: "completed", sessionId: "sess-42", metadata: { user_id: "u-981", tags: ["research"] } })
    expect(totalCost(apply(c, result))).toBe(0.000451)
  })

  test("trace D: the workflow name, the root's input and output, the session", () => {
    const d = [stored(F.fixture6), stored(F.fixture7)]
    const result = finalizeTrace(d)
    expect(result.trace).toEqual({
      name: "summarize_doc",
      status: "completed",
      input: { args: ["OpenTelemetry is an observability framework for cloud-native software."], kwargs: {} },
      output: "OpenTelemetry standardizes traces, metrics and logs across vendors.",
      sessionId: "chat-7781",
      startedAt: "2026-08-20T10:00:00.000Z",
      endedAt: "2026-08-20T10:00:01.250Z",
      metadata: { otel: { trace_id: F.TRACE_D }, service_name: "fixture-app", user_id: "u-22" },
      environment: "production"
    })
    expect(totalTokens(apply(d, result))).toBe(50)
  })

  test("trace E: the session found on a child; the outer AI SDK aggregate is not promoted", () => {
    const e = [stored(F.fixture8), stored(F.fixture8Parent)]
    expect(e[1]!.metadata.aggregate_usage).toEqual({ input_tokens: 31, output_tokens: 14 })
    const result = finalizeTrace(e)
    expect(result.trace).toMatchObject({ name: "support-bot", status: "completed", sessionId: "thread-5521", metadata: { user_id: "u-77" } })
    expect(result.spanUpdates).toEqual([])
    expect(totalTokens(apply(e, result))).toBe(45)
  })

  test("trace F: a failed child under a successful root; the tool inherits the legacy run's agent", () => {
    const f = [stored(F.fixture9), stored(F.fixture9Parent)]
    const result = finalizeTrace(f)
    expect(result.trace.status).toBe("completed")
    expect(result.trace.name).toBe("agent run")
    expect(updateOf(result, "6392c178-857d-592a-bb77-3d487bb3f52e")).toEqual({
      id: "6392c178-857d-592a-bb77-3d487bb3f52e", agent_id: "support_agent", agent_role: "support_agent"
    })
  })

  test("trace G: the session is the LangSmith thread, never the project", () => {
    const result = finalizeTrace([stored(F.fixture10), stored(F.fixture10Parent)])
    expect(result.trace).toMatchObject({ status: "completed", sessionId: "thr-300", name: "RunnableSequence" })
  })
})

describe("finalizeTrace: scenarios", () => {
  test("children before parents: nothing to inherit until the parent arrives", () => {
    const agent = stored(compact("a000000000000001", "", { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Planner" }))
    const chat = stored(compact("c000000000000001", "a000000000000001", { "gen_ai.operation.name": "chat" }, { startTimeUnixNano: "1787220000100000000" }))
    const early = finalizeTrace([chat])
    expect(early.spanUpdates).toEqual([])
    expect(early.trace.status).toBe("running")
    const late = finalizeTrace([chat, agent])
    expect(late.spanUpdates).toEqual([{ id: chat.id, agent_id: "Planner", agent_role: "Planner" }])
    expect(late.trace.status).toBe("completed")
  })

  test("a local root until the true root arrives, which then decides name, status and end", () => {
    const local = stored(compact("b000000000000001", "e000000000000001", {}, { name: "handle request", flags: 0x301, startTimeUnixNano: "1787220000100000000", endTimeUnixNano: "1787220000900000000" }))
    const withLocal = finalizeTrace([local])
    expect(withLocal.trace).toMatchObject({ name: "handle request", status: "completed", endedAt: "2026-08-20T10:00:00.900Z" })
    const root = stored(compact("e000000000000001", "", {}, { name: "gateway", status: { code: 2, message: "upstream failed" }, endTimeUnixNano: "1787220002000000000" }))
    const withRoot = finalizeTrace([local, root])
    expect(withRoot.trace).toMatchObject({ name: "gateway", status: "failed", endedAt: "2026-08-20T10:00:02.000Z", startedAt: "2026-08-20T10:00:00.000Z" })
  })

  test("a span whose flags say nothing about its parent is not a local root", () => {
    const orphan = stored(compact("b000000000000001", "e000000000000001", {}, { flags: 0x100 }))
    expect(finalizeTrace([orphan]).trace.status).toBe("running")
  })

  test("a failed child under a successful root leaves the trace completed; a failed root fails it", () => {
    const root = stored(compact("a000000000000001", "", {}))
    const child = stored(compact("c000000000000001", "a000000000000001", { "http.request.method": "GET" }, { status: { code: 2, message: "ECONNREFUSED" } }))
    expect(finalizeTrace([child, root]).trace.status).toBe("completed")
    const failedRoot = stored(compact("a000000000000001", "", { "error.type": "Crash" }))
    expect(finalizeTrace([child, failedRoot]).trace.status).toBe("failed")
  })

  test("orphan aggregate usage is promoted, then given back when a child with tokens arrives", () => {
    const agent = stored(compact("a000000000000001", "", {
      "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "remote", "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20, "gen_ai.usage.cost": 0.5
    }, { kind: 3 }))
    const tool = stored(compact("d000000000000001", "a000000000000001", { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t" }))
    const first = finalizeTrace([agent, tool])
    expect(updateOf(first, agent.id)).toEqual({ id: agent.id, input_tokens: 100, output_tokens: 20, cost: 0.5 })
    const afterFirst = apply([agent, tool], first)
    expect(totalTokens(afterFirst)).toBe(120)
    expect(totalCost(afterFirst)).toBe(0.5)
    expect(finalizeTrace(afterFirst).spanUpdates).toEqual([])

    const chat = stored(compact("c000000000000001", "d000000000000001", { "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 90, "gen_ai.usage.output_tokens": 18 }))
    const second = finalizeTrace([...afterFirst, chat])
    // The chat's tokens are the real ones now; the aggregate gives its tokens back but keeps the cost,
    // since no child reports one.
    expect(updateOf(second, afterFirst[0]!.id)).toMatchObject({ input_tokens: 0, output_tokens: 0 })
    expect(updateOf(second, afterFirst[0]!.id)!.cost).toBeUndefined()
    const afterSecond = apply([...afterFirst, chat], second)
    expect(totalTokens(afterSecond)).toBe(108)
    expect(totalCost(afterSecond)).toBe(0.5)
    expect(finalizeTrace(afterSecond).spanUpdates).toEqual([])
  })

  test("aggregate not double counted when children have tokens; nested aggregates promote only the innermost", () => {
    const outer = stored(compact("a000000000000001", "", { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "A", "gen_ai.usage.input_tokens": 50 }))
    const inner = stored(compact("b000000000000001", "a000000000000001", { "ai.operationId": "ai.generateText", "ai.usage.inputTokens": 50 }))
    const result = finalizeTrace([outer, inner])
    expect(updateOf(result, inner.id)).toMatchObject({ input_tokens: 50 })
    expect(updateOf(result, outer.id)?.input_tokens).toBeUndefined()
    expect(totalTokens(apply([outer, inner], result))).toBe(50)
  })

  test("a child reporting zero tokens does not stop the promotion", () => {
    const agent = stored(compact("a000000000000001", "", { "gen_ai.operation.name": "invoke_agent", "gen_ai.usage.input_tokens": 10 }))
    const chat = stored(compact("c000000000000001", "a000000000000001", { "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 0 }))
    expect(updateOf(finalizeTrace([agent, chat]), agent.id)).toMatchObject({ input_tokens: 10 })
  })

  test("a session id over 100 characters is stored as sha256 of it", () => {
    const long = "s".repeat(101)
    const root = stored(compact("a000000000000001", "", { "session.id": long }))
    const sessionId = finalizeTrace([root]).trace.sessionId!
    expect(sessionId).toBe("sha256:" + createHash("sha256").update(long).digest("hex").slice(0, 56))
    expect(sessionId.length).toBeLessThanOrEqual(100)
    const other = stored(compact("a000000000000001", "", { "session.id": "s".repeat(100) + "t" }))
    expect(finalizeTrace([other]).trace.sessionId).not.toBe(sessionId)
    const exact = stored(compact("a000000000000001", "", { "session.id": "s".repeat(100) }))
    expect(finalizeTrace([exact]).trace.sessionId).toBe("s".repeat(100))
  })

  test("session: the root's first, then spans in start order, then the resource", () => {
    const root = stored(compact("a000000000000001", "", {}, { resource: { "service.name": "svc", "session.id": "from-resource" } }))
    const late = stored(compact("c000000000000002", "a000000000000001", { "session.id": "late" }, { startTimeUnixNano: "1787220000500000000" }))
    const early = stored(compact("c000000000000001", "a000000000000001", { "gen_ai.conversation.id": "early" }, { startTimeUnixNano: "1787220000100000000" }))
    expect(finalizeTrace([late, root, early]).trace.sessionId).toBe("early")
    expect(finalizeTrace([root]).trace.sessionId).toBe("from-resource")
    const rooted = stored(compact("a000000000000001", "", { "session.id": "root" }))
    expect(finalizeTrace([late, rooted, early]).trace.sessionId).toBe("root")
  })

  test("nested agents: the chat under Researcher gets parent_agent_id of TripPlanner", () => {
    const trip = stored(compact("a000000000000001", "", { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "asst_trip_01", "gen_ai.agent.name": "TripPlanner" }))
    const researcher = stored(compact("a000000000000002", "a000000000000001", { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "agent_r", "gen_ai.agent.name": "Researcher" }))
    const step = stored(compact("d000000000000001", "a000000000000002", { "traceloop.span.kind": "task" }))
    const chat = stored(compact("c000000000000001", "d000000000000001", { "gen_ai.operation.name": "chat" }))
    const result = finalizeTrace([chat, step, researcher, trip])
    expect(updateOf(result, chat.id)).toEqual({ id: chat.id, agent_id: "agent_r", agent_role: "Researcher", parent_agent_id: "asst_trip_01" })
    expect(updateOf(result, researcher.id)).toEqual({ id: researcher.id, agent_id: "agent_r", agent_role: "Researcher", parent_agent_id: "asst_trip_01" })
    expect(updateOf(result, trip.id)).toBeUndefined()
  })

  test("a remote-client span and the in-process span of the same agent count once", () => {
    const boss = stored(compact("a000000000000001", "", { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "boss" }))
    const client = stored(compact("a000000000000002", "a000000000000001", { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "worker" }, { kind: 3 }))
    const server = stored(compact("a000000000000003", "a000000000000002", { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "worker" }))
    const chat = stored(compact("c000000000000001", "a000000000000003", { "gen_ai.operation.name": "chat" }))
    const result = finalizeTrace([boss, client, server, chat])
    expect(updateOf(result, chat.id)).toMatchObject({ agent_id: "worker", parent_agent_id: "boss" })
    expect(updateOf(result, server.id)).toMatchObject({ parent_agent_id: "boss" })
  })

  test("an agent span without a name inherits the identity above it", () => {
    const named = stored(compact("a000000000000001", "", { "openinference.span.kind": "AGENT", "agent.name": "outer" }))
    const anonymous = stored(compact("a000000000000002", "a000000000000001", { "gen_ai.operation.name": "invoke_agent" }))
    const result = finalizeTrace([named, anonymous])
    expect(updateOf(result, anonymous.id)).toEqual({ id: anonymous.id, agent_id: "outer", agent_role: "outer" })
  })

  test("langfuse trace input/output override the root's; without a root input, the earliest llm_call's", () => {
    const root = stored(compact("a000000000000001", "", { "input.value": "root in", "output.value": "root out", "langfuse.trace.tags": ["x"] }))
    const child = stored(compact("c000000000000001", "a000000000000001", { "langfuse.trace.input": "{\"q\":\"override\"}", "langfuse.trace.output": "final" }))
    expect(finalizeTrace([root, child]).trace).toMatchObject({ input: { q: "override" }, output: "final", metadata: { tags: ["x"] } })
    const bare = stored(compact("a000000000000001", "", {}))
    const first = stored(compact("c000000000000001", "a000000000000001", { "gen_ai.operation.name": "chat", "input.value": "first in", "output.value": "first out" }, { startTimeUnixNano: "1787220000100000000", endTimeUnixNano: "1787220000200000000" }))
    const last = stored(compact("c000000000000002", "a000000000000001", { "gen_ai.operation.name": "chat", "input.value": "last in", "output.value": "last out" }, { startTimeUnixNano: "1787220000300000000", endTimeUnixNano: "1787220000900000000" }))
    expect(finalizeTrace([last, bare, first]).trace).toMatchObject({ input: "first in", output: "last out" })
  })

  test("a sandbox environment only when a sender says so", () => {
    const sandbox = stored(compact("a000000000000001", "", {}, { resource: { "service.name": "svc", "deployment.environment.name": "sandbox" } }))
    expect(finalizeTrace([sandbox]).trace).toMatchObject({ environment: "sandbox", metadata: { environment: "sandbox", service_name: "svc" } })
    const staging = stored(compact("a000000000000001", "", { "langfuse.environment": "staging" }))
    expect(finalizeTrace([staging]).trace.environment).toBe("production")
  })

  test("an empty list still gives a well-formed running trace", () => {
    expect(finalizeTrace([]).trace).toMatchObject({ status: "running", name: null, sessionId: null, endedAt: null })
  })
})

/** A random forest of stored spans: parents earlier in the list, missing, or none; random finalize hints. */
const trees = fc.array(
  fc.record({
    parent: fc.oneof(fc.constant<number | null>(null), fc.nat(), fc.constant(-1)),
    startMs: fc.integer({ min: 0, max: 10_000 }),
    length: fc.option(fc.integer({ min: 0, max: 5000 }), { nil: undefined }),
    type: fc.constantFrom("llm_call" as const, "tool_call" as const, "action" as const, "error" as const),
    localRoot: fc.boolean(),
    failed: fc.boolean(),
    agent: fc.option(fc.record({ isAgent: fc.boolean(), id: fc.option(fc.constantFrom("a", "b", "c"), { nil: undefined }) }), { nil: undefined }),
    tokens: fc.option(fc.nat({ max: 1000 }), { nil: undefined }),
    aggregate: fc.option(fc.record({ input_tokens: fc.nat({ max: 1000 }), cost: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }) }), { nil: undefined }),
    session: fc.option(fc.string({ maxLength: 150 }), { nil: undefined }),
    hints: fc.option(fc.dictionary(fc.constantFrom("name", "input", "output", "tags", "environment", "resource_session_id"), fc.json()), { nil: undefined }),
    junkMetadata: fc.boolean()
  }),
  { maxLength: 40 }
).map((rows) =>
  rows.map((row, i): StoredSpan => {
    const id = `00000000-0000-5000-8000-${String(i).padStart(12, "0")}`
    const parent_id = row.parent === null || i === 0 ? null : row.parent === -1 ? "ffffffff-0000-5000-8000-000000000000" : `00000000-0000-5000-8000-${String(row.parent % i).padStart(12, "0")}`
    const otel: Record<string, unknown> = {}
    if (parent_id === null) otel.root = true
    else if (row.localRoot) otel.local_root = true
    if (row.failed) otel.failed = true
    const metadata: Record<string, unknown> = row.junkMetadata
      ? { otel: "nope", agent: [1], aggregate_usage: "x", trace_hints: 3 }
      : {
        otel,
        ...(row.agent ? { agent: { is_agent_span: row.agent.isAgent, ...(row.agent.id ? { own_id: row.agent.id, own_role: row.agent.id.toUpperCase() } : {}) } } : {}),
        ...(row.aggregate ? { aggregate_usage: row.aggregate } : {}),
        ...(row.session !== undefined ? { session_id: row.session } : {}),
        ...(row.hints ? { trace_hints: row.hints } : {})
      }
    const span: StoredSpan = {
      id, parent_id, span_type: row.type, name: `span ${i}`, metadata,
      started_at: new Date(Date.UTC(2026, 7, 20) + row.startMs).toISOString()
    }
    if (row.length !== undefined) span.ended_at = new Date(Date.UTC(2026, 7, 20) + row.startMs + row.length).toISOString()
    if (row.tokens !== undefined && row.aggregate === undefined) span.input_tokens = row.tokens
    if (row.agent?.id !== undefined) span.agent_id = row.agent.id
    return span
  })
)

const hasRoot = (spans: ReadonlyArray<StoredSpan>) => {
  const ids = new Set(spans.map((s) => s.id))
  return spans.some((s) => {
    const otel = s.metadata.otel as Record<string, unknown> | string
    return s.parent_id === null || (typeof otel === "object" && otel.local_root === true && !ids.has(s.parent_id))
  })
}

describe("finalizeTrace: properties", () => {
  test("never throws on random trees; running exactly when no root is present", () => {
    fc.assert(fc.property(trees, (spans) => {
      const result = finalizeTrace(spans)
      expect(result.trace.status === "running").toBe(!hasRoot(spans))
      if (result.trace.status === "running") {
        expect(result.trace.name).toBeNull()
        expect(result.trace.endedAt).toBeNull()
      }
      if (result.trace.sessionId !== null) expect(result.trace.sessionId.length).toBeLessThanOrEqual(100)
      const ids = new Set(spans.map((s) => s.id))
      for (const u of result.spanUpdates) {
        expect(ids.has(u.id)).toBe(true)
        for (const n of [u.input_tokens, u.output_tokens]) if (n !== undefined) expect(Number.isInteger(n) && n >= 0 && n <= 1e12).toBe(true)
        if (u.cost !== undefined) expect(Number.isFinite(u.cost) && u.cost >= 0).toBe(true)
      }
    }), { numRuns: Number(process.env.FINALIZE_RUNS ?? 1000) })
  })

  test("applying the updates reaches a fixpoint: a second pass changes nothing", () => {
    fc.assert(fc.property(trees, (spans) => {
      const once = apply(spans, finalizeTrace(spans))
      expect(finalizeTrace(once).spanUpdates).toEqual([])
    }), { numRuns: Number(process.env.FINALIZE_RUNS ?? 500) })
  })

  test("the arrival order does not matter", () => {
    fc.assert(fc.property(trees.chain((spans) => fc.shuffledSubarray(spans, { minLength: spans.length, maxLength: spans.length }).map((shuffled) => [spans, shuffled] as const)), ([spans, shuffled]) => {
      const a = finalizeTrace(spans)
      const b = finalizeTrace(shuffled)
      expect(b.trace).toEqual(a.trace)
      const byId = (x: TraceFinalization) => [...x.spanUpdates].sort((p, q) => (p.id < q.id ? -1 : 1))
      expect(byId(b)).toEqual(byId(a))
    }), { numRuns: Number(process.env.FINALIZE_RUNS ?? 500) })
  })

  test("aggregate usage is counted at most once along any path", () => {
    fc.assert(fc.property(trees, (spans) => {
      const after = apply(spans, finalizeTrace(spans))
      const byId = new Map(after.map((s) => [s.id, s]))
      for (const s of after) {
        if (!(typeof s.metadata.aggregate_usage === "object" && (s.input_tokens ?? 0) > 0)) continue
        // A promoted aggregate has no descendant with tokens.
        const stack = after.filter((c) => c.parent_id === s.id)
        const seen = new Set<string>()
        while (stack.length > 0) {
          const c = stack.pop()!
          if (seen.has(c.id)) continue
          seen.add(c.id)
          expect((c.input_tokens ?? 0) + (c.output_tokens ?? 0)).toBe(0)
          stack.push(...after.filter((d) => d.parent_id === c.id))
        }
        expect(byId.has(s.id)).toBe(true)
      }
    }), { numRuns: Number(process.env.FINALIZE_RUNS ?? 300) })
  })
})

/** Random OTLP trees through the real mapping: agent, aggregate and usage attributes in random mixes. */
const otlpTrees = fc.array(
  fc.record({
    parent: fc.oneof(fc.constant<number | null>(null), fc.nat(), fc.constant(-1)),
    start: fc.integer({ min: 0, max: 5000 }),
    flags: fc.constantFrom(0, 0x100, 0x300),
    failed: fc.boolean(),
    attributes: fc.dictionary(
      fc.constantFrom(
        "gen_ai.operation.name", "gen_ai.agent.id", "gen_ai.agent.name", "agent_name", "openinference.span.kind", "agent.name",
        "traceloop.span.kind", "traceloop.entity.name", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cost",
        "gen_ai.aggregated_usage.input_tokens", "ai.operationId", "ai.usage.inputTokens", "session.id", "langfuse.trace.name",
        "langfuse.trace.input", "user.id", "tag.tags"
      ),
      fc.oneof(
        fc.constantFrom("invoke_agent", "create_agent", "chat", "execute_tool", "AGENT", "CHAIN", "agent", "workflow", "ai.generateText", "ai.generateText.doGenerate", "a", "b"),
        fc.nat({ max: 500 }),
        fc.double({ min: 0, max: 2, noNaN: true })
      ),
      { maxKeys: 5 }
    )
  }),
  { minLength: 1, maxLength: 25 }
).map((rows) =>
  rows.map((row, i) => {
    const spanId = (i + 1).toString(16).padStart(16, "0")
    const parentSpanId = row.parent === null || i === 0 ? "" : row.parent === -1 ? "ffffffffffffffff" : ((row.parent % i) + 1).toString(16).padStart(16, "0")
    return stored(compact(spanId, parentSpanId, row.attributes, {
      flags: row.flags, status: { code: row.failed ? 2 : 0 },
      startTimeUnixNano: String(1787220000000000000n + BigInt(row.start) * 1_000_000n)
    }))
  })
)

describe("finalizeTrace over mapped spans: properties", () => {
  test("never throws, reaches a fixpoint, and never counts more tokens than the spans report", () => {
    fc.assert(fc.property(otlpTrees, (spans) => {
      const result = finalizeTrace(spans)
      expect(result.trace.status === "running").toBe(!hasRoot(spans))
      const after = apply(spans, result)
      expect(finalizeTrace(after).spanUpdates).toEqual([])
      const own = spans.reduce((t, s) => t + (s.input_tokens ?? 0) + (s.output_tokens ?? 0), 0)
      const aggregates = spans.reduce((t, s) => {
        const agg = s.metadata.aggregate_usage as { input_tokens?: number; output_tokens?: number } | undefined
        return t + (agg?.input_tokens ?? 0) + (agg?.output_tokens ?? 0)
      }, 0)
      expect(totalTokens(after)).toBeGreaterThanOrEqual(own)
      expect(totalTokens(after)).toBeLessThanOrEqual(own + aggregates)
      for (const u of result.spanUpdates) {
        for (const field of ["agent_id", "agent_role", "parent_agent_id"] as const) {
          if (u[field] !== undefined) expect(u[field]!.length).toBeLessThanOrEqual(500)
        }
      }
    }), { numRuns: Number(process.env.FINALIZE_RUNS ?? 300) })
  })
})
