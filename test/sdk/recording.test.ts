import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { type AddressInfo, createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Schema } from "effect"
import {
  extractUsage,
  type FetchLike,
  type SpanHandle,
  Tapedeck,
  TapedeckError,
  type TapedeckOptions,
  wrapModel,
  wrapTool
} from "tapedeck/sdk"
import { TraceDetail } from "#src/domain/Trace"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { bookTrip } from "./example-agent.ts"

let server: TestServer
const unhandled: unknown[] = []
const onUnhandled = (reason: unknown) => {
  unhandled.push(reason)
}
const clients: Tapedeck[] = []

beforeAll(async () => {
  server = await startTestServer()
  process.on("unhandledRejection", onUnhandled)
})
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()))
  process.off("unhandledRejection", onUnhandled)
  await server.stop()
})

interface Call {
  readonly method: string
  readonly path: string
  readonly spans: number | undefined
  readonly chars: number
}

/** A client on the test server, collecting its errors and (optionally) the requests it makes. */
const client = (options: Partial<TapedeckOptions> = {}) => {
  const errors: TapedeckError[] = []
  const calls: Call[] = []
  const inner = options.fetch ?? ((url: string, init: RequestInit) => fetch(url, init))
  const spy: FetchLike = (url, init) => {
    const body = typeof init.body === "string" ? init.body : ""
    const spans = (JSON.parse(body || "{}") as { spans?: unknown[] }).spans?.length
    calls.push({ method: init.method ?? "GET", path: new URL(url).pathname, spans, chars: body.length })
    return inner(url, init)
  }
  const tapedeck = new Tapedeck({
    baseUrl: server.url,
    apiKey: KEY_A,
    onError: (e) => errors.push(e),
    ...options,
    fetch: spy
  })
  clients.push(tapedeck)
  return { tapedeck, errors, calls }
}

const getDetail = async (id: string): Promise<any> => {
  const response = await server.get(`/api/v1/traces/${id}`)
  expect(response.status).toBe(200)
  const body = await response.json()
  Schema.decodeUnknownSync(TraceDetail)(body)
  return body
}

const byName = (detail: any) => new Map<string, any>(detail.spans.map((s: any) => [s.name, s]))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const durationOf = (span: any) => Date.parse(span.ended_at) - Date.parse(span.started_at)

const closedPort = () =>
  new Promise<number>((resolve) => {
    const s = createServer()
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo
      s.close(() => resolve(port))
    })
  })

const jsonResponse = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } })

describe("recording a run", () => {
  test("nested spans (agent → llm_call + tool_call) are recorded with every field and the run finished", async () => {
    const { tapedeck, errors } = client()
    const before = Date.now()
    const run = tapedeck.startRun({
      name: "nested",
      input: { question: "hi" },
      sessionId: "chat-7",
      metadata: { env: "test" }
    })
    const agent = run.startSpan({
      type: "action",
      name: "agent",
      input: { goal: "answer" },
      agentId: "agent-1",
      agentRole: "planner",
      metadata: { attempt: 1 }
    })
    const llm = agent.startSpan({
      type: "llm_call",
      name: "plan",
      model: "gpt-4o",
      input: [{ role: "user", content: "hi" }]
    })
    await sleep(15)
    llm.end({ output: "search then answer", inputTokens: 120, outputTokens: 30, cost: 0.0021 })
    const tool = run.startSpan({
      type: "tool_call",
      name: "search",
      parent: agent,
      input: { q: "x" },
      parentAgentId: "agent-1"
    })
    tool.end({ output: [1, 2], metadata: { hits: 2 } })
    agent.end({ output: { done: true }, metadata: { attempt: 2, ok: true } })
    expect(agent.ended).toBe(true)
    await run.finish({ status: "completed", output: { answer: 42 } })
    const after = Date.now()

    const detail = await getDetail(run.id)
    expect(detail).toMatchObject({
      id: run.id,
      name: "nested",
      status: "completed",
      input: { question: "hi" },
      output: { answer: 42 },
      sessionId: "chat-7",
      metadata: { env: "test" },
      spanCount: 3,
      totalTokens: 150,
      totalCost: "0.0021"
    })
    expect(Date.parse(detail.startedAt)).toBeGreaterThanOrEqual(before)
    expect(Date.parse(detail.endedAt)).toBeLessThanOrEqual(after)
    expect(detail.totalDurationMs).toBe(Date.parse(detail.endedAt) - Date.parse(detail.startedAt))

    const spans = byName(detail)
    expect(spans.get("agent")).toEqual({
      id: agent.id,
      parent_id: null,
      span_type: "action",
      name: "agent",
      input: { goal: "answer" },
      output: { done: true },
      agent_id: "agent-1",
      agent_role: "planner",
      metadata: { attempt: 2, ok: true },
      started_at: expect.any(String),
      ended_at: expect.any(String),
      duration_ms: expect.any(Number)
    })
    expect(spans.get("plan")).toEqual({
      id: llm.id,
      parent_id: agent.id,
      span_type: "llm_call",
      name: "plan",
      model: "gpt-4o",
      input: [{ role: "user", content: "hi" }],
      output: "search then answer",
      input_tokens: 120,
      output_tokens: 30,
      cost: 0.0021,
      started_at: expect.any(String),
      ended_at: expect.any(String),
      duration_ms: expect.any(Number)
    })
    expect(spans.get("search")).toEqual({
      id: tool.id,
      parent_id: agent.id,
      span_type: "tool_call",
      name: "search",
      input: { q: "x" },
      output: [1, 2],
      parent_agent_id: "agent-1",
      metadata: { hits: 2 },
      started_at: expect.any(String),
      ended_at: expect.any(String),
      duration_ms: expect.any(Number)
    })
    for (const span of detail.spans) {
      expect(span.started_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      expect(Number.isInteger(span.duration_ms)).toBe(true)
      expect(span.duration_ms).toBe(durationOf(span))
      expect(Date.parse(span.ended_at)).toBeLessThanOrEqual(Date.parse(detail.endedAt))
    }
    expect(spans.get("plan").duration_ms).toBeGreaterThanOrEqual(10)
    expect(detail.causalOrder[0]).toBe(agent.id)
    expect(errors).toEqual([])
    expect(tapedeck.stats()).toMatchObject({ failed: 0, dropped: 0, queued: 0 })
    expect(tapedeck.stats().sent).toBeGreaterThanOrEqual(3)
  })

  test("spans sent at start are visible while still open; the end replaces them", async () => {
    const { tapedeck, errors } = client({ flushIntervalMs: 60_000 })
    const run = tapedeck.startRun({ name: "crashy" })
    const root = run.startSpan({ type: "action", name: "root" })
    const open = root.startSpan({ type: "reasoning", name: "thinking", input: "hmm" })
    root.end()
    await tapedeck.flush()

    let detail = await getDetail(run.id)
    expect(detail.status).toBe("running")
    expect(detail.spanCount).toBe(2)
    const thinking = byName(detail).get("thinking")
    expect(thinking.parent_id).toBe(root.id)
    expect(thinking.input).toBe("hmm")
    expect(thinking.ended_at).toBeUndefined()
    expect(thinking.duration_ms).toBeUndefined()
    expect(byName(detail).get("root").ended_at).toBeString()

    open.end({ output: "thought" })
    await tapedeck.flush()
    detail = await getDetail(run.id)
    expect(detail.spanCount).toBe(2)
    expect(byName(detail).get("thinking")).toMatchObject({ output: "thought", ended_at: expect.any(String) })
    // Never finished (a crashed agent): the trace stays running with what it recorded.
    await tapedeck.close()
    expect((await getDetail(run.id)).status).toBe("running")
    expect(errors).toEqual([])
    // root's start and end went in one update (both happened before the flush); thinking's in two.
    expect(tapedeck.stats()).toEqual({ sent: 3, dropped: 0, failed: 0, queued: 0 })
  })

  test("the trace is created (running, no spans) before any span is sent, within a flush interval", async () => {
    const { tapedeck, calls } = client({ flushIntervalMs: 20 })
    const run = tapedeck.startRun({ name: "early" })
    await sleep(150)
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(["POST /api/v1/traces"])
    expect(await getDetail(run.id)).toMatchObject({ status: "running", spanCount: 0 })
    run.startSpan({ type: "action", name: "a" }).end()
    await run.finish()
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      "POST /api/v1/traces",
      `POST /api/v1/traces/${run.id}/spans`,
      `PATCH /api/v1/traces/${run.id}`
    ])
  })

  test("finish ends the spans still open, records an error as an error span, and later spans are dropped", async () => {
    const { tapedeck, errors } = client({ flushIntervalMs: 60_000 })
    const run = tapedeck.startRun({ name: "failing" })
    const open = run.startSpan({ type: "action", name: "never-ended" })
    const first = run.finish({ error: new TypeError("bad input"), output: { partial: true } })
    expect(run.finish()).toBe(first)
    expect(run.finished).toBe(true)
    await first
    open.end({ output: "too late" })
    const late = run.startSpan({ type: "action", name: "late" })
    late.end()
    expect(late.ended).toBe(true)
    expect(tapedeck.stats().dropped).toBe(1)
    expect(errors.map((e) => e.operation)).toEqual(["record"])

    const detail = await getDetail(run.id)
    expect(detail.status).toBe("failed")
    expect(detail.output).toEqual({ partial: true })
    const spans = byName(detail)
    expect(spans.size).toBe(2)
    expect(spans.get("never-ended").ended_at).toBe(detail.endedAt)
    expect(spans.get("never-ended").output).toBeUndefined()
    expect(spans.get("TypeError")).toMatchObject({ span_type: "error", parent_id: null, error: "TypeError: bad input" })
  })

  test("ids: a chosen run id is used; a bad one, a bad projectId or parent are replaced and reported", async () => {
    const { tapedeck, errors } = client()
    const id = crypto.randomUUID()
    const chosen = tapedeck.startRun({ id })
    expect(chosen.id).toBe(id)
    const bad = tapedeck.startRun({ id: "run-1", projectId: "nope" })
    expect(bad.id).toMatch(/^[0-9a-f-]{36}$/)
    const orphan = bad.startSpan({ type: "action", name: "orphan", parent: "not-a-span" })
    const foreign = bad.startSpan({
      type: "action",
      name: "foreign",
      parent: chosen.startSpan({ type: "action", name: "x" })
    })
    orphan.end()
    foreign.end()
    await Promise.all([chosen.finish(), bad.finish()])
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringContaining("run id"),
      expect.stringContaining("projectId"),
      expect.stringContaining("not a span id"),
      expect.stringContaining("not a span of this run")
    ])
    const detail = await getDetail(bad.id)
    expect(detail.spans.map((s: any) => s.parent_id)).toEqual([null, null])
    expect((await getDetail(id)).status).toBe("completed")
  })
})

describe("wrappers", () => {
  test("wrapTool records input and output, and rethrows the agent's error unchanged while recording it", async () => {
    const { tapedeck, errors } = client()
    const run = tapedeck.startRun({ name: "tools" })
    const search = wrapTool(run, "web_search", async (args: { q: string }) => ({ results: [`about ${args.q}`] }))
    expect(await search({ q: "lisbon" })).toEqual({ results: ["about lisbon"] })

    const boom = new Error("tool exploded")
    const failing = wrapTool(run, "failing_tool", async (_n: number): Promise<number> => {
      throw boom
    })
    const caught = await failing(1).catch((e: unknown) => e)
    expect(caught).toBe(boom)

    const add = wrapTool(run, "add", (a: number, b: number) => a + b)
    expect(add(2, 3)).toBe(5)
    const syncFail = wrapTool(run, "sync_fail", (): never => {
      throw boom
    })
    expect(() => syncFail()).toThrow(boom)
    const thrownString = wrapTool(run, "throws_string", async () => {
      throw "plain string"
    })
    expect(await thrownString().catch((e: unknown) => e)).toBe("plain string")

    const counter = {
      n: 41,
      next: wrapTool(run, "method", function (this: { n: number }) {
        return ++this.n
      })
    }
    expect(counter.next()).toBe(42)

    const agent = run.startSpan({ type: "action", name: "agent" })
    const child = wrapTool(agent, "child_tool", async (x: string) => x.toUpperCase(), {
      agentId: "a-1",
      metadata: { source: "test" },
      mapOutput: (r) => ({ upper: r })
    })
    expect(await child("ok")).toBe("OK")
    agent.end()
    await run.finish()

    const spans = byName(await getDetail(run.id))
    // (Before the toMatchObject calls below: Bun's toMatchObject writes its asymmetric matchers into the received object.)
    for (const span of spans.values()) expect([span.name, span.duration_ms]).toEqual([span.name, durationOf(span)])
    expect(spans.get("web_search")).toMatchObject({
      span_type: "tool_call",
      parent_id: null,
      input: { q: "lisbon" },
      output: { results: ["about lisbon"] }
    })
    expect(spans.get("web_search").error).toBeUndefined()
    expect(spans.get("failing_tool")).toMatchObject({
      input: 1,
      error: "Error: tool exploded",
      ended_at: expect.any(String)
    })
    expect(spans.get("failing_tool").output).toBeUndefined()
    expect(spans.get("add")).toMatchObject({ input: [2, 3], output: 5 })
    expect(spans.get("sync_fail")).toMatchObject({ input: [], error: "Error: tool exploded" })
    expect(spans.get("throws_string").error).toBe("plain string")
    expect(spans.get("method").output).toBe(42)
    expect(spans.get("child_tool")).toMatchObject({
      parent_id: agent.id,
      agent_id: "a-1",
      metadata: { source: "test" },
      input: "ok",
      output: { upper: "OK" }
    })
    expect(errors).toEqual([])
  })

  test("wrapModel records model, tokens and cost from common result shapes", async () => {
    const { tapedeck, errors } = client()
    const run = tapedeck.startRun({ name: "models" })
    type Msg = { role: string; content: string }
    const aiSdk = wrapModel(run, "gpt-4o", async (messages: Msg[]) => ({
      content: `echo ${messages.length}`,
      usage: { inputTokens: 12, outputTokens: 3, totalTokens: 15 }
    }))
    const openai = wrapModel(
      run,
      "gpt-4o-mini",
      async (_: Msg[]) => ({
        choices: [{ message: { role: "assistant", content: "hi" } }],
        usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 }
      }),
      { name: "openai-chat" }
    )
    const anthropic = wrapModel(run, "claude-sonnet-4", async (_: Msg[]) => ({
      content: [{ type: "text", text: "yo" }],
      usage: { input_tokens: 5, output_tokens: 1 },
      cost: 0.5
    }))
    const local = wrapModel(run, "local-model", (prompt: string) => prompt.toUpperCase(), {
      usage: (text) => ({ inputTokens: text.length, outputTokens: 1, cost: 0.25 })
    })
    const failing = wrapModel(run, "flaky-model", async (_: Msg[]): Promise<never> => {
      throw new RangeError("context too long")
    })

    const messages = [{ role: "user", content: "hello" }]
    expect((await aiSdk(messages)).content).toBe("echo 1")
    expect((await openai(messages)).usage.total_tokens).toBe(9)
    await anthropic(messages)
    expect(local("abc")).toBe("ABC")
    expect(await failing(messages).catch((e: Error) => e.message)).toBe("context too long")
    await run.finish()

    const detail = await getDetail(run.id)
    const spans = byName(detail)
    expect(spans.get("gpt-4o")).toMatchObject({
      span_type: "llm_call",
      model: "gpt-4o",
      input: messages,
      output: { content: "echo 1" },
      input_tokens: 12,
      output_tokens: 3
    })
    expect(spans.get("openai-chat")).toMatchObject({ model: "gpt-4o-mini", input_tokens: 7, output_tokens: 2 })
    expect(spans.get("claude-sonnet-4")).toMatchObject({ input_tokens: 5, output_tokens: 1, cost: 0.5 })
    expect(spans.get("local-model")).toMatchObject({
      input: "abc",
      output: "ABC",
      input_tokens: 3,
      output_tokens: 1,
      cost: 0.25
    })
    expect(spans.get("flaky-model")).toMatchObject({ model: "flaky-model", error: "RangeError: context too long" })
    expect(spans.get("flaky-model").input_tokens).toBeUndefined()
    expect(detail.totalTokens).toBe(12 + 3 + 7 + 2 + 5 + 1 + 3 + 1)
    // The two calls reported without a cost are priced by the server (gpt-4o: 12 in, 3 out; gpt-4o-mini: 7 in, 2 out).
    expect(spans.get("gpt-4o")).toMatchObject({ cost: (12 * 2.5 + 3 * 10) / 1e6, cost_estimated: true })
    expect(spans.get("openai-chat")).toMatchObject({ cost: (7 * 0.15 + 2 * 0.6) / 1e6, cost_estimated: true })
    expect(spans.get("claude-sonnet-4").cost_estimated).toBeUndefined()
    expect(detail.totalCost).toBe("0.75006225")
    expect(errors).toEqual([])
  })

  test("extractUsage understands the usual client libraries and ignores the rest", () => {
    expect(extractUsage({ usage: { inputTokens: 1, outputTokens: 2 } })).toEqual({ inputTokens: 1, outputTokens: 2 })
    expect(extractUsage({ usage: { inputTokens: { total: 9, cacheRead: 4 }, outputTokens: { total: 3 } } })).toEqual({
      inputTokens: 9,
      outputTokens: 3
    })
    expect(extractUsage({ usage: { promptTokens: 4, completionTokens: 5 } })).toEqual({
      inputTokens: 4,
      outputTokens: 5
    })
    expect(extractUsage({ usageMetadata: { promptTokenCount: 6, candidatesTokenCount: 7 } })).toEqual({
      inputTokens: 6,
      outputTokens: 7
    })
    expect(extractUsage({ prompt_eval_count: 8, eval_count: 9 })).toEqual({ inputTokens: 8, outputTokens: 9 })
    expect(extractUsage({ response: { usage: { input_tokens: 1, output_tokens: 1, cost: 0.1 } } })).toEqual({
      inputTokens: 1,
      outputTokens: 1,
      cost: 0.1
    })
    expect(extractUsage("text")).toEqual({})
    expect(extractUsage(null)).toEqual({})
    expect(extractUsage({ usage: { inputTokens: "many" } })).toEqual({})
  })

  test("a span target may be chosen per call; a throwing target or mapper never breaks the call", async () => {
    const { tapedeck } = client()
    const run = tapedeck.startRun({ name: "targets" })
    let current: SpanHandle | undefined
    const tool = wrapTool(
      () => current ?? run,
      "lookup",
      async (k: string) => k
    )
    await tool("root-level")
    current = run.startSpan({ type: "action", name: "step" })
    await tool("in-step")
    current.end()
    const broken = wrapTool(
      () => {
        throw new Error("no target")
      },
      "broken",
      (x: number) => x * 2,
      {
        mapInput: () => {
          throw new Error("bad mapper")
        }
      }
    )
    expect(broken(21)).toBe(42)
    const badMapper = wrapTool(run, "bad_mapper", (x: number) => x, {
      mapOutput: () => {
        throw new Error("bad mapper")
      }
    })
    expect(badMapper(1)).toBe(1)
    await run.finish()
    const detail = await getDetail(run.id)
    const lookups = detail.spans.filter((s: any) => s.name === "lookup")
    expect(lookups.map((s: any) => [s.input, s.parent_id]).sort()).toEqual([
      ["in-step", current.id],
      ["root-level", null]
    ])
    expect(byName(detail).get("bad_mapper")).toMatchObject({ input: 1, ended_at: expect.any(String) })
    expect(byName(detail).has("broken")).toBe(false)
  })
})

describe("batching and ordering", () => {
  const tree = (tapedeck: Tapedeck, n: number) => {
    const run = tapedeck.startRun({ name: `batch-${n}` })
    const spans: SpanHandle[] = []
    for (let i = 0; i < n; i++) {
      // A deep chain mixed with siblings: parents are often in an earlier batch.
      const parent = i === 0 ? undefined : spans[i % 3 === 0 ? i - 1 : Math.floor(i / 2)]
      spans.push(run.startSpan({ type: "reasoning", name: `s${i}`, input: { i }, parent }))
    }
    for (const span of [...spans].reverse()) span.end({ output: span.name })
    return { run, spans }
  }

  const expectTree = async (runId: string, spans: SpanHandle[]) => {
    const detail = await getDetail(runId)
    expect(detail.spanCount).toBe(spans.length)
    expect(detail.spans.length).toBe(spans.length)
    const stored = new Map<string, any>(detail.spans.map((s: any) => [s.id, s]))
    for (let i = 0; i < spans.length; i++) {
      const expected = i === 0 ? null : spans[i % 3 === 0 ? i - 1 : Math.floor(i / 2)]!.id
      expect(stored.get(spans[i]!.id)?.parent_id).toBe(expected)
      expect(stored.get(spans[i]!.id)?.ended_at).toBeString()
    }
  }

  test("1200 spans are all stored; maxBatchSpans is capped at the API's 1000", async () => {
    const { tapedeck, calls, errors } = client({ maxBatchSpans: 5000, flushIntervalMs: 60_000 })
    const { run, spans } = tree(tapedeck, 1200)
    await run.finish()
    const batches = calls.filter((c) => c.path.endsWith("/spans")).map((c) => c.spans)
    expect(batches).toEqual([1000, 200])
    await expectTree(run.id, spans)
    expect(errors).toEqual([])
    expect(tapedeck.stats()).toEqual({ sent: 1200, dropped: 0, failed: 0, queued: 0 })
  })

  test("by default 500 spans per request, sent as soon as a batch is full", async () => {
    const { tapedeck, calls } = client({ flushIntervalMs: 60_000 })
    const { run, spans } = tree(tapedeck, 1200)
    await run.finish()
    const batches = calls.filter((c) => c.path.endsWith("/spans")).map((c) => c.spans!)
    expect(batches.every((n) => n <= 500)).toBe(true)
    expect(batches.reduce((a, b) => a + b, 0)).toBe(1200)
    await expectTree(run.id, spans)
  })

  test("batches are also cut by size (maxBatchBytes)", async () => {
    const { tapedeck, calls } = client({ maxBatchBytes: 5_000, flushIntervalMs: 60_000 })
    const run = tapedeck.startRun({ name: "by-size" })
    const root = run.startSpan({ type: "action", name: "root" })
    for (let i = 0; i < 40; i++) root.startSpan({ type: "tool_call", name: `t${i}`, input: "x".repeat(500) }).end()
    root.end()
    await run.finish()
    const batches = calls.filter((c) => c.path.endsWith("/spans"))
    expect(batches.length).toBeGreaterThan(4)
    expect(batches.every((c) => c.chars < 5_000 + 1_000)).toBe(true)
    expect((await getDetail(run.id)).spanCount).toBe(41)
  })

  test("a parent whose update was dropped is sent again before its child", async () => {
    const { tapedeck, errors } = client({ maxQueueSpans: 1, flushIntervalMs: 60_000 })
    const run = tapedeck.startRun({ name: "reparent" })
    const filler = run.startSpan({ type: "action", name: "filler" })
    const parent = run.startSpan({ type: "action", name: "parent" })
    expect(tapedeck.stats()).toMatchObject({ queued: 1, dropped: 1 })
    await tapedeck.flush()
    const child = parent.startSpan({ type: "tool_call", name: "child" })
    await tapedeck.flush()
    const detail = await getDetail(run.id)
    expect(byName(detail).get("child").parent_id).toBe(parent.id)
    expect(byName(detail).has("parent")).toBe(true)
    for (const span of [child, parent, filler]) {
      span.end()
      await tapedeck.flush()
    }
    await run.finish()
    expect((await getDetail(run.id)).spans.every((s: any) => typeof s.ended_at === "string")).toBe(true)
    expect(errors).toEqual([])
  })

  test("the queue is bounded: updates beyond maxQueueSpans are dropped and counted", async () => {
    const { tapedeck } = client({ maxQueueSpans: 10, flushIntervalMs: 60_000 })
    const run = tapedeck.startRun({ name: "bounded" })
    const spans = Array.from({ length: 15 }, (_, i) => run.startSpan({ type: "action", name: `s${i}` }))
    expect(tapedeck.stats()).toEqual({ sent: 0, dropped: 5, failed: 0, queued: 10 })
    // The ends of the 10 queued spans replace their queued start; the 5 others find the queue full.
    for (const span of spans) span.end()
    expect(tapedeck.stats()).toEqual({ sent: 0, dropped: 10, failed: 0, queued: 10 })
    await tapedeck.flush()
    expect(tapedeck.stats()).toEqual({ sent: 10, dropped: 10, failed: 0, queued: 0 })
    const detail = await getDetail(run.id)
    expect(detail.spans.map((s: any) => s.name).sort()).toEqual(
      spans
        .slice(0, 10)
        .map((s) => s.name)
        .sort()
    )
    expect(detail.spans.every((s: any) => typeof s.ended_at === "string")).toBe(true)
  })
})

describe("failures never reach the agent", () => {
  test("server down: the agent completes promptly, finish resolves after the retries, failures are counted", async () => {
    const port = await closedPort()
    const errors: TapedeckError[] = []
    const tapedeck = new Tapedeck({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: KEY_A,
      onError: (e) => errors.push(e),
      flushIntervalMs: 10,
      retryBaseDelayMs: 10,
      maxRetries: 3
    })
    clients.push(tapedeck)
    const started = performance.now()
    const run = tapedeck.startRun({ name: "offline" })
    const tool = wrapTool(run, "tool", async (x: number) => x + 1)
    let total = 0
    for (let i = 0; i < 50; i++) total += await tool(i)
    const agent = run.startSpan({ type: "action", name: "agent" })
    agent.end({ output: total })
    const agentMs = performance.now() - started
    expect(total).toBe(1275)
    expect(agentMs).toBeLessThan(250)

    const finished = performance.now()
    await run.finish({ output: total })
    expect(performance.now() - finished).toBeLessThan(10_000)
    expect(errors[0]!.operation).toBe("create_trace")
    expect(errors[0]!.message).toContain("network error")

    // Found unreachable moments ago: the next run's finish does not wait out retries again.
    const next = tapedeck.startRun({ name: "offline-2" })
    next.startSpan({ type: "action", name: "b" }).end()
    const quick = performance.now()
    await next.finish()
    expect(performance.now() - quick).toBeLessThan(100)
    expect(errors.at(-1)!.message).toContain("unreachable moments ago")

    await tapedeck.close()
    const stats = tapedeck.stats()
    expect(stats.sent).toBe(0)
    expect(stats.queued).toBe(0)
    expect(stats.failed + stats.dropped).toBeGreaterThanOrEqual(52)
    expect(stats.failed).toBeGreaterThan(0)
    expect(errors.length).toBeGreaterThan(0)
    expect(errors.every((e) => e instanceof TapedeckError && e.status === undefined)).toBe(true)
    await sleep(20)
    expect(unhandled).toEqual([])
  })

  test("after an outage, recording resumes once the server answers again", async () => {
    let down = true
    const switchable: FetchLike = async (url, init) => {
      if (down) throw new TypeError("connect ECONNREFUSED")
      return fetch(url, init)
    }
    const { tapedeck, errors } = client({
      fetch: switchable,
      retryBaseDelayMs: 1,
      maxRetries: 1,
      outageCooldownMs: 50,
      flushIntervalMs: 60_000
    })
    const run = tapedeck.startRun({ name: "outage" })
    const root = run.startSpan({ type: "action", name: "root" })
    root.startSpan({ type: "tool_call", name: "lost" }).end()
    await tapedeck.flush()
    expect(tapedeck.stats()).toMatchObject({ sent: 0, failed: 2, queued: 0 })
    down = false
    await sleep(60)
    // The open root is still known: sent again with its child's parent, the trace created first.
    root.startSpan({ type: "tool_call", name: "kept" }).end()
    root.end()
    await run.finish()
    const detail = await getDetail(run.id)
    expect(detail.status).toBe("completed")
    expect(detail.spans.map((s: any) => s.name).sort()).toEqual(["kept", "root"])
    expect(byName(detail).get("kept").parent_id).toBe(root.id)
    expect(errors.map((e) => e.operation)).toEqual(["create_trace"])
  })

  test("a 4xx (invalid key) is reported through onError, not retried, not thrown", async () => {
    const { tapedeck, errors, calls } = client({ apiKey: "svc_not_a_real_key" })
    const run = tapedeck.startRun({ name: "unauthorized" })
    const span = run.startSpan({ type: "action", name: "a" })
    span.end()
    await run.finish()
    expect(calls.length).toBe(1)
    expect(errors.length).toBe(1)
    expect(errors[0]).toBeInstanceOf(TapedeckError)
    expect(errors[0]).toMatchObject({
      status: 401,
      code: "unauthorized",
      operation: "create_trace",
      traceId: run.id,
      spanCount: 1
    })
    expect(tapedeck.stats()).toEqual({ sent: 0, dropped: 0, failed: 1, queued: 0 })
    expect((await server.get(`/api/v1/traces/${run.id}`)).status).toBe(404)
  })

  test("429 (Retry-After honoured), 503 and network errors are retried until the request lands", async () => {
    let n = 0
    const flaky: FetchLike = async (url, init) => {
      n++
      if (n === 1)
        return jsonResponse(429, { error: "slow down", code: "rate_limited", retryable: true }, { "retry-after": "1" })
      if (n === 2) return jsonResponse(503, { error: "busy", code: "internal", retryable: true })
      if (n === 3) throw new TypeError("fetch failed")
      return fetch(url, init)
    }
    const { tapedeck, errors, calls } = client({ fetch: flaky, retryBaseDelayMs: 10, flushIntervalMs: 60_000 })
    const started = Date.now()
    const run = tapedeck.startRun({ name: "flaky" })
    run.startSpan({ type: "action", name: "a" }).end()
    await run.finish()
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000)
    expect(calls.map((c) => c.method + " " + c.path.replace(run.id, "ID"))).toEqual([
      "POST /api/v1/traces",
      "POST /api/v1/traces",
      "POST /api/v1/traces",
      "POST /api/v1/traces",
      "POST /api/v1/traces/ID/spans",
      "PATCH /api/v1/traces/ID"
    ])
    expect(errors).toEqual([])
    expect(await getDetail(run.id)).toMatchObject({ status: "completed", spanCount: 1 })
  })

  test("a lost answer does not lose the trace: a 409 on a retried create means it exists", async () => {
    let creates = 0
    const lossy: FetchLike = async (url, init) => {
      const response = await fetch(url, init)
      if (new URL(url).pathname === "/api/v1/traces" && creates++ === 0) throw new TypeError("connection reset")
      return response
    }
    const { tapedeck, errors } = client({ fetch: lossy, retryBaseDelayMs: 5 })
    const run = tapedeck.startRun({ name: "lost-answer" })
    run.startSpan({ type: "action", name: "a" }).end()
    await run.finish()
    expect(errors).toEqual([])
    expect(await getDetail(run.id)).toMatchObject({ status: "completed", spanCount: 1 })
  })

  test("5xx until the retries run out: reported with the status, counted as failed", async () => {
    const down: FetchLike = async (url, init) =>
      new URL(url).pathname.endsWith("/spans")
        ? jsonResponse(500, { error: "boom", code: "internal", retryable: true })
        : fetch(url, init)
    const { tapedeck, errors, calls } = client({ fetch: down, retryBaseDelayMs: 5, maxRetries: 2 })
    const run = tapedeck.startRun({ name: "5xx" })
    run.startSpan({ type: "action", name: "a" }).end()
    run.startSpan({ type: "action", name: "b" }).end()
    await run.finish()
    expect(calls.filter((c) => c.path.endsWith("/spans")).length).toBe(3)
    expect(errors.length).toBe(1)
    expect(errors[0]).toMatchObject({ status: 500, code: "internal", operation: "send_spans", spanCount: 2 })
    expect(errors[0]!.message).toContain("after retries")
    expect(tapedeck.stats()).toMatchObject({ sent: 0, failed: 2, queued: 0 })
    expect(await getDetail(run.id)).toMatchObject({ status: "completed", spanCount: 0 })
  })

  test("a batch refused with 400 is halved until only the bad span (and its children) are lost", async () => {
    const picky: FetchLike = async (url, init) =>
      String(init.body).includes('"name":"poison"')
        ? jsonResponse(400, { error: "spans.0: no", code: "validation_failed", retryable: false })
        : fetch(url, init)
    const { tapedeck, errors } = client({ fetch: picky, flushIntervalMs: 60_000 })
    const run = tapedeck.startRun({ name: "poisoned" })
    const spans = Array.from({ length: 20 }, (_, i) =>
      run.startSpan({ type: "action", name: i === 7 ? "poison" : `ok${i}` })
    )
    await tapedeck.flush()
    expect(errors.map((e) => [e.status, e.spanCount])).toEqual([[400, 1]])
    expect(tapedeck.stats()).toMatchObject({ sent: 19, failed: 1 })
    // A child of the refused span is not even sent; the refused span's own end is not sent again.
    const child = spans[7]!.startSpan({ type: "action", name: "poison-child" })
    for (const span of [...spans, child]) span.end()
    await run.finish()
    const detail = await getDetail(run.id)
    expect(detail.spanCount).toBe(19)
    expect(detail.spans.every((s: any) => typeof s.ended_at === "string")).toBe(true)
    expect(byName(detail).has("poison-child")).toBe(false)
    expect(detail.status).toBe("completed")
    expect(tapedeck.stats()).toEqual({ sent: 38, dropped: 0, failed: 3, queued: 0 })
    expect(errors.length).toBe(2)
    expect(errors[1]!.message).toContain("parent span was refused")
  })

  test("spans into a trace that is no longer running are refused (409) and reported", async () => {
    const { tapedeck, errors } = client({ flushIntervalMs: 60_000 })
    const run = tapedeck.startRun({ name: "closed-elsewhere" })
    await tapedeck.flush()
    expect((await server.request("PATCH", `/api/v1/traces/${run.id}`, { body: { status: "completed" } })).status).toBe(
      200
    )
    run.startSpan({ type: "action", name: "after" }).end()
    await tapedeck.flush()
    expect(errors.map((e) => [e.status, e.code, e.operation])).toEqual([[409, "conflict", "send_spans"]])
    expect(tapedeck.stats()).toMatchObject({ failed: 1, queued: 0 })
  })

  test("unstorable values are repaired instead of failing the batch", async () => {
    const { tapedeck, errors } = client({ maxPayloadBytes: 10_000 })
    const run = tapedeck.startRun({ name: "n".repeat(600), sessionId: "s".repeat(150), input: { text: "a\u0000b" } })
    const circular: Record<string, unknown> = { name: "loop" }
    circular.self = circular
    let deep: unknown = "bottom"
    for (let i = 0; i < 100; i++) deep = { d: deep }
    const input = {
      circular,
      big: 10n ** 30n,
      nul: "x\u0000y",
      lone: "\ud800z",
      deep,
      date: new Date("2026-01-02T03:04:05.678Z"),
      map: new Map([["k", 1]]),
      set: new Set([1, 2]),
      error: new Error("inner"),
      bytes: new Uint8Array(16),
      sparse: [1, undefined, () => 1],
      nan: Number.NaN,
      ["__proto__"]: { polluted: true },
      huge: "h".repeat(50_000)
    }
    const span = run.startSpan({
      type: "action",
      name: "x".repeat(600),
      model: "m".repeat(150),
      input,
      agentId: "\udc00",
      metadata: ["not", "an", "object"] as never
    })
    span.end({ inputTokens: -5, outputTokens: 2.6, cost: Number.POSITIVE_INFINITY, error: { code: 42 } })
    await run.finish()
    expect(errors).toEqual([])

    const detail = await getDetail(run.id)
    expect(detail.name.length).toBe(500)
    expect(detail.sessionId.length).toBe(100)
    expect(detail.input).toEqual({ text: "a\uFFFDb" })
    const stored = detail.spans[0]
    expect(stored.name.length).toBe(500)
    expect(stored.model.length).toBe(100)
    expect(stored.agent_id).toBe("\uFFFD")
    expect(stored.metadata).toEqual({ value: ["not", "an", "object"] })
    expect(stored.input_tokens).toBeUndefined()
    expect(stored.output_tokens).toBe(3)
    expect(stored.cost).toBeUndefined()
    expect(stored.error).toBe('{"code":42}')
    expect(stored.input.circular).toEqual({ name: "loop", self: "[circular]" })
    expect(stored.input.big).toBe("1000000000000000000000000000000")
    expect(stored.input.nul).toBe("x\uFFFDy")
    expect(stored.input.lone).toBe("\uFFFDz")
    expect(JSON.stringify(stored.input.deep)).toContain("[nested too deep]")
    expect(stored.input.date).toBe("2026-01-02T03:04:05.678Z")
    expect(stored.input.map).toEqual({ k: 1 })
    expect(stored.input.set).toEqual([1, 2])
    expect(stored.input.error).toMatchObject({ name: "Error", message: "inner" })
    expect(stored.input.bytes).toBe("[Uint8Array 16 bytes]")
    expect(stored.input.sparse).toEqual([1, null, null])
    expect(stored.input.nan).toBeNull()
    expect(Object.hasOwn(stored.input, "__proto__")).toBe(true)
    expect(stored.input.huge.length).toBeLessThan(11_000)
    expect(stored.input.huge).toEndWith("[truncated]")
  })

  test("nothing throws synchronously, whatever the arguments", async () => {
    const errors: TapedeckError[] = []
    const tapedeck = new Tapedeck({
      baseUrl: server.url,
      apiKey: KEY_A,
      onError: (e) => {
        errors.push(e)
        throw new Error("a broken onError callback")
      }
    })
    clients.push(tapedeck)
    const run = tapedeck.startRun(null as never)
    const span = run.startSpan({ type: "bogus" as never, name: 42 as never, parent: {} as never, metadata: 7 as never })
    span.end(null as never)
    span.end({ output: 1 })
    run.startSpan(undefined as never).end()
    expect(() => new Tapedeck(undefined as never)).not.toThrow()
    const broken = new Tapedeck({ baseUrl: "not a url", apiKey: KEY_A, maxRetries: 0, onError: () => {}, fetch })
    broken.startRun().startSpan({ type: "action", name: "x" }).end()
    await broken.close()
    expect(broken.stats().failed).toBe(1)
    await run.finish()
    const detail = await getDetail(run.id)
    expect(detail.spans.map((s: any) => [s.span_type, s.name, typeof s.ended_at]).sort()).toEqual([
      ["action", "42", "string"],
      ["action", "action", "string"]
    ])
    expect(byName(detail).get("42").metadata).toEqual({ value: 7 })
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringContaining("unknown span type"),
      expect.stringContaining("not a span of this run"),
      expect.stringContaining("unknown span type")
    ])
  })

  test("close flushes, then later runs and spans are dropped; close is idempotent", async () => {
    const { tapedeck, errors } = client({ flushIntervalMs: 60_000 })
    const run = tapedeck.startRun({ name: "closing" })
    const open = run.startSpan({ type: "action", name: "open" })
    const closing = tapedeck.close()
    expect(tapedeck.close()).toBe(closing)
    await closing
    const detail = await getDetail(run.id)
    expect(detail).toMatchObject({ status: "running", spanCount: 1 })
    open.end()
    const late = tapedeck.startRun({ name: "late" })
    late.startSpan({ type: "action", name: "x" }).end()
    await late.finish()
    await run.finish()
    // open's end and late's span
    expect(tapedeck.stats()).toMatchObject({ sent: 1, dropped: 2, queued: 0 })
    expect((await server.get(`/api/v1/traces/${late.id}`)).status).toBe(404)
    expect(errors.length).toBeGreaterThan(0)
  })
})

describe("example agent and runtimes", () => {
  test("the travel booking agent records its whole run", async () => {
    const { tapedeck, errors } = client()
    const result = await bookTrip(tapedeck, "Fly me to LIS on 2026-06-01")
    expect(result.confirmation).toBe("CONF-AF1024")
    expect(result.answer).toContain("AF1024")

    const detail = await getDetail(result.runId)
    expect(detail).toMatchObject({
      name: "travel-booking",
      status: "completed",
      sessionId: "travel-chat-1",
      input: { request: "Fly me to LIS on 2026-06-01" },
      output: { answer: result.answer, confirmation: "CONF-AF1024" },
      metadata: { agent: "travel-booker", version: "1.0" },
      spanCount: 8
    })
    // Spans come ordered by start time, at millisecond precision: ties are in any order.
    const names = detail.spans.map((s: any) => s.name)
    expect(names[0]).toBe("travel-agent")
    expect([...names].sort()).toEqual([
      "answer",
      "book_flight",
      "check_weather",
      "check_weather",
      "choose-flight",
      "plan",
      "search_flights",
      "travel-agent"
    ])
    const named = (name: string) => detail.spans.filter((s: any) => s.name === name)
    const [agent, plan, choose, search, book, answer] = [
      "travel-agent",
      "plan",
      "choose-flight",
      "search_flights",
      "book_flight",
      "answer"
    ].map((name) => named(name)[0])
    const [weather1, weather2] = named("check_weather").sort((a: any, b: any) => (a.error ? 0 : 1) - (b.error ? 0 : 1))
    expect(agent).toMatchObject({
      id: result.agentSpanId,
      parent_id: null,
      span_type: "action",
      agent_id: "travel-agent",
      agent_role: "orchestrator"
    })
    for (const span of detail.spans.slice(1)) expect(span.parent_id).toBe(agent.id)
    expect(plan).toMatchObject({
      span_type: "llm_call",
      model: "gpt-4o-mini",
      agent_id: "travel-agent",
      output: { model: "gpt-4o-2024-08-06" }
    })
    expect(plan.input_tokens).toBeGreaterThan(0)
    expect(plan.output_tokens).toBeGreaterThan(0)
    expect(JSON.parse(plan.output.content)).toEqual({
      steps: ["search_flights", "check_weather", "book_flight"],
      destination: "LIS"
    })
    expect(choose).toMatchObject({ span_type: "reasoning", output: { chosen: "AF1024", reason: "cheapest" } })
    expect(search).toMatchObject({ span_type: "tool_call", input: { to: "LIS", date: "2026-06-01" } })
    expect(search.output.map((f: any) => f.id)).toEqual(["AF1024", "TP1351"])
    expect(weather1).toMatchObject({ input: "Lisbon", error: "Error: weather service timed out" })
    expect(weather2).toMatchObject({ input: "Lisbon", output: { forecast: "sunny" } })
    expect(book).toMatchObject({ output: { confirmation: "CONF-AF1024", price: 149 } })
    expect(answer).toMatchObject({ span_type: "llm_call", model: "gpt-4o", name: "answer" })
    const tokens = detail.spans.reduce((n: number, s: any) => n + (s.input_tokens ?? 0) + (s.output_tokens ?? 0), 0)
    expect(detail.totalTokens).toBe(tokens)
    expect(detail.spans.every((s: any) => s.duration_ms === durationOf(s))).toBe(true)
    expect(errors).toEqual([])
  })

  const sdkEntry = join(import.meta.dir, "..", "..", "src", "sdk", "index.ts")
  const agentScript = (importFrom: string) => `
    import { Tapedeck } from ${JSON.stringify(importFrom)}
    const tapedeck = new Tapedeck({ baseUrl: process.env.URL, apiKey: process.env.KEY, flushIntervalMs: 60_000 })
    const run = tapedeck.startRun({ name: "exit" })
    run.startSpan({ type: "action", name: "only" }).end()
    console.log(run.id)
  `
  const node = Bun.which("node")
  const runtimes: Array<[string, (dir: string) => Promise<string[]>]> = [
    [
      "bun",
      async (dir) => {
        writeFileSync(join(dir, "agent.ts"), agentScript(sdkEntry))
        return [process.execPath, join(dir, "agent.ts")]
      }
    ],
    ...(node === null
      ? []
      : [
          [
            "node (the SDK bundled for Node, no Bun APIs)",
            async (dir: string) => {
              const built = await Bun.build({ entrypoints: [sdkEntry], target: "node", outdir: dir, naming: "sdk.mjs" })
              if (!built.success) throw new Error(built.logs.join("\n"))
              writeFileSync(join(dir, "agent.mjs"), agentScript("./sdk.mjs"))
              return [node, join(dir, "agent.mjs")]
            }
          ] as [string, (dir: string) => Promise<string[]>]
        ])
  ]
  for (const [runtime, prepare] of runtimes) {
    test(`${runtime}: a process that never closes its client sends its data on exit and is not kept alive`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "tapedeck-sdk-"))
      try {
        const started = Date.now()
        const child = Bun.spawn(await prepare(dir), {
          env: { ...process.env, URL: server.url, KEY: KEY_A },
          stdout: "pipe",
          stderr: "pipe"
        })
        const code = await child.exited
        const stdout = await new Response(child.stdout).text()
        if (code !== 0) throw new Error(await new Response(child.stderr).text())
        expect(Date.now() - started).toBeLessThan(10_000)
        const detail = await getDetail(stdout.trim())
        expect(detail).toMatchObject({ name: "exit", status: "running" })
        expect(detail.spans.map((s: any) => s.name)).toEqual(["only"])
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })
  }
})
