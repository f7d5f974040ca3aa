import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, FastCheck as fc } from "effect"
import { startFakeOpenAi, type FakeOpenAi, type FakeReply } from "../support/FakeOpenAi.ts"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"

let fake: FakeOpenAi
let next: (call: number) => FakeReply | undefined = () => undefined
let server: TestServer
beforeAll(async () => {
  fake = startFakeOpenAi((_request, call) => next(call))
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: fake.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_LLM_RETRY_BASE_MS: "10",
    TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "1000"
  })
})
afterAll(async () => {
  await server.stop()
  await fake.stop()
})

/** A recorded run: plan (llm) → search (tool) → answer (llm), plus an early step before the fork point. */
const recordRun = async (key = KEY_A) => {
  const root = span({
    span_type: "action",
    name: "agent",
    started_at: "2026-01-01T00:00:00.000Z",
    ended_at: "2026-01-01T00:00:10.000Z"
  })
  const early = span({
    parent_id: root.id,
    span_type: "reasoning",
    name: "think",
    started_at: "2026-01-01T00:00:00.500Z",
    output: "go"
  })
  const plan = span({
    parent_id: root.id,
    name: "plan",
    model: "gpt-4o-mini",
    started_at: "2026-01-01T00:00:01.000Z",
    input: [
      { role: "system", content: "You book travel." },
      { role: "user", content: "Book Lisbon" }
    ],
    output: "search flights"
  })
  const search = span({
    parent_id: root.id,
    span_type: "tool_call",
    name: "web_search",
    started_at: "2026-01-01T00:00:02.000Z",
    output: { results: ["recorded"] }
  })
  const book = span({
    parent_id: root.id,
    span_type: "tool_call",
    name: "book_flight",
    started_at: "2026-01-01T00:00:03.000Z",
    output: "booked"
  })
  const answer = span({
    parent_id: root.id,
    name: "answer",
    model: "gpt-4o-mini",
    started_at: "2026-01-01T00:00:04.000Z",
    input: "summarise",
    output: "done"
  })
  const t = trace({ name: "travel", spans: [root, early, plan, search, book, answer] })
  expect((await server.post("/api/v1/traces", t, key)).status).toBe(200)
  return { t, root, early, plan, search, book, answer }
}

const createFork = async (body: Record<string, unknown>, key = KEY_A) => {
  const response = await server.post("/api/v1/forks", body, key)
  return { response, body: (await response.clone().json()) as any }
}

describe("forks", () => {
  test("create, get and list: camelCase, pending, newest first; strict body; the fork point must be in the trace", async () => {
    const run = await recordRun()
    const { response, body } = await createFork({
      trace_id: run.t.id,
      fork_point_span_id: run.plan.id,
      modified_input: "Book Porto",
      name: "porto"
    })
    expect(response.status).toBe(200)
    expect(body).toMatchObject({
      traceId: run.t.id,
      forkPointSpanId: run.plan.id,
      name: "porto",
      description: null,
      modifiedInput: "Book Porto",
      status: "pending",
      resultTraceId: null
    })
    expect((await (await server.get(`/api/v1/forks/${body.id}`)).json()) as any).toMatchObject({
      id: body.id,
      status: "pending"
    })
    const second = await createFork({ trace_id: run.t.id, fork_point_span_id: run.answer.id, modified_input: null })
    const list = (await (await server.get("/api/v1/forks?limit=2")).json()) as any
    expect(list.items.map((f: any) => f.id)).toEqual([second.body.id, body.id])
    expect(list).toMatchObject({ limit: 2, offset: 0 })
    expect(list.total).toBeGreaterThanOrEqual(2)

    expect(
      (await createFork({ trace_id: run.t.id, fork_point_span_id: uuid(), modified_input: 1 })).response.status
    ).toBe(400)
    expect(
      (await createFork({ trace_id: run.t.id, fork_point_span_id: run.plan.id, modified_input: 1, colour: "red" }))
        .response.status
    ).toBe(400)
    expect((await createFork({ trace_id: run.t.id, fork_point_span_id: run.plan.id })).response.status).toBe(400)
    expect(
      (await createFork({ trace_id: uuid(), fork_point_span_id: run.plan.id, modified_input: 1 })).response.status
    ).toBe(404)
  })

  test("every fork route answers another account's fork or trace as missing", async () => {
    const run = await recordRun()
    const { body: fork } = await createFork({
      trace_id: run.t.id,
      fork_point_span_id: run.plan.id,
      modified_input: "x"
    })
    expect(
      (await createFork({ trace_id: run.t.id, fork_point_span_id: run.plan.id, modified_input: "x" }, KEY_B)).response
        .status
    ).toBe(404)
    expect((await server.get(`/api/v1/forks/${fork.id}`, KEY_B)).status).toBe(404)
    expect((await server.post(`/api/v1/forks/${fork.id}/replay`, {}, KEY_B)).status).toBe(404)
    const listed = (await (await server.get("/api/v1/forks?limit=100", KEY_B)).json()) as any
    expect(listed.items.map((f: any) => f.id)).not.toContain(fork.id)
    expect((await server.get("/api/v1/forks/not-a-uuid")).status).toBe(400)
  })
})

describe("server replay", () => {
  test("copies what came before, marks the fork point, re-executes model calls with the modified input, mocks tools", async () => {
    const run = await recordRun()
    const { body: fork } = await createFork({
      trace_id: run.t.id,
      fork_point_span_id: run.plan.id,
      modified_input: "Book Porto instead",
      mock_outputs: { web_search: { results: ["mocked"] } }
    })
    const before = fake.requests.length
    next = () => ({ content: "replayed answer", usage: { prompt_tokens: 30, completion_tokens: 8 } })
    const response = await server.post(`/api/v1/forks/${fork.id}/replay`, {})
    expect(response.status).toBe(200)
    const result = (await response.json()) as any
    expect(result).toMatchObject({
      fork_id: fork.id,
      status: "completed",
      mode: "server",
      byte_replayed: 2,
      faithful_reexec: 2
    })
    expect(typeof result.execution_id).toBe("string")
    expect(result.fidelity_caveats).toContain(
      "tool 'book_flight' output reused from the recording; side effects were not re-run"
    )
    expect(result.fidelity_caveats.join(" ")).not.toContain("web_search")

    const asked = fake.requests.slice(before).map((r) => r.body)
    expect(asked.length).toBe(2)
    expect(asked[0].messages).toEqual([
      { role: "system", content: "You book travel." },
      { role: "user", content: "Book Porto instead" }
    ])
    expect(asked[1].messages[0].content).toContain("Book Porto instead")

    const stored = (await (await server.get(`/api/v1/traces/${result.result_trace_id}`)).json()) as any
    expect(stored.input).toBe("Book Porto instead")
    expect(stored.metadata).toMatchObject({
      environment: "sandbox",
      fork_id: fork.id,
      execution_id: result.execution_id,
      source_trace_id: run.t.id
    })
    const byName = Object.fromEntries(stored.spans.map((s: any) => [s.name, s]))
    expect(byName.think).toEqual(run.early)
    expect(byName[`fork: plan`].span_type).toBe("fork_point")
    expect(byName.plan.parent_id).toBe(byName["fork: plan"].id)
    expect(byName.plan.output).toMatchObject({ role: "assistant", content: "replayed answer" })
    expect(byName.plan).toMatchObject({ input_tokens: 30, output_tokens: 8 })
    expect(typeof byName.plan.cost).toBe("number")
    expect(byName.web_search.output).toEqual({ results: ["mocked"] })
    expect(byName.book_flight.output).toBe("booked")
    expect(stored.totalTokens).toBe(76)
    // Re-executed calls sit on the recording's timeline (the copied spans keep their times), so the branch's
    // duration compares with the original's (10 s) instead of spanning from the recording to now.
    expect(byName.plan.started_at).toBe(run.plan.started_at)
    expect(byName.answer.started_at).toBe(run.answer.started_at)
    expect(Date.parse(byName.plan.metadata.replay.executed_at)).toBeGreaterThan(Date.parse("2026-01-02T00:00:00Z"))
    expect(stored.totalDurationMs).toBeLessThan(60_000)

    const sandbox = (await (await server.get("/api/v1/traces?env=sandbox&limit=100")).json()) as any
    expect(sandbox.items.map((t: any) => t.id)).toContain(result.result_trace_id)
    const production = (await (await server.get("/api/v1/traces?limit=100")).json()) as any
    expect(production.items.map((t: any) => t.id)).not.toContain(result.result_trace_id)
    expect((await (await server.get(`/api/v1/forks/${fork.id}`)).json()) as any).toMatchObject({
      status: "completed",
      resultTraceId: result.result_trace_id
    })

    // A completed fork may be replayed again: a new generation with a new result trace.
    const again = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(again.status).toBe("completed")
    expect(again.result_trace_id).not.toBe(result.result_trace_id)
    expect(again.execution_id).not.toBe(result.execution_id)

    // A repeated create of the finished result trace (an SDK resuming) is answered "resumed".
    const resumed = await server.post("/api/v1/traces", {
      id: result.result_trace_id,
      started_at: "2026-01-01T00:00:00Z"
    })
    expect(await resumed.json()).toEqual({ id: result.result_trace_id, status: "resumed" })
    next = () => undefined
  })

  test("a model provider failure fails the generation with a clear error and gives the unit back", async () => {
    const run = await recordRun()
    const { body: fork } = await createFork({
      trace_id: run.t.id,
      fork_point_span_id: run.plan.id,
      modified_input: "x"
    })
    const used = () =>
      server.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ used: number }>`
        SELECT coalesce(sum(u.used), 0)::int AS used FROM replay_usage u JOIN accounts a ON a.id = u.account_id WHERE a.name = 'acme'`
          return rows[0]!.used
        }).pipe(Effect.orDie)
      )
    const before = await used()
    next = () => ({ status: 400, errorMessage: "model not found" })
    const result = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    next = () => undefined
    expect(await used()).toBe(before)
    expect(result).toMatchObject({ status: "failed", mode: "server" })
    expect(result.error).toContain("plan")
    expect((await (await server.get(`/api/v1/forks/${fork.id}`)).json()) as any).toMatchObject({ status: "failed" })
    expect((await server.post(`/api/v1/forks/${fork.id}/replay`, {})).status).toBe(200)
  })

  test("the replay body must be empty or {}", async () => {
    const run = await recordRun()
    const { body: fork } = await createFork({
      trace_id: run.t.id,
      fork_point_span_id: run.plan.id,
      modified_input: "x"
    })
    expect((await server.post(`/api/v1/forks/${fork.id}/replay`, { force: true })).status).toBe(400)
    const bare = await fetch(`${server.url}/api/v1/forks/${fork.id}/replay`, {
      method: "POST",
      headers: { "x-service-key": KEY_A }
    })
    expect(bare.status).toBe(200)
  })
})

describe("allowance and concurrency", () => {
  test("the monthly allowance: the replay past it is 402; a replay that did no model work refunds its unit", async () => {
    const local = await startTestServer({ TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "2" })
    try {
      const root = span({ name: "plan", model: "gpt-4o-mini", input: "hi", output: "ok" })
      const t = trace({ spans: [root] })
      await local.post("/api/v1/traces", t)
      const fork = (await (
        await local.post("/api/v1/forks", { trace_id: t.id, fork_point_span_id: root.id, modified_input: "hey" })
      ).json()) as any
      // No model provider on this server: the replay says so, reuses the recorded outputs and re-executes nothing.
      const first = (await (await local.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
      expect(first).toMatchObject({ status: "completed", faithful_reexec: 0 })
      expect(first.fidelity_caveats).toContain(
        "no model provider configured: llm_call outputs reused from the recording"
      )
      expect((await local.post(`/api/v1/forks/${fork.id}/replay`, {})).status).toBe(200)
      const refused = await local.post(`/api/v1/forks/${fork.id}/replay`, {})
      expect(refused.status).toBe(402)
      expect(await refused.json()).toMatchObject({ code: "replay_allowance_exhausted", retryable: false })
      // Another account has its own allowance.
      const otherSpan = span()
      const other = trace({ spans: [otherSpan] })
      await local.post("/api/v1/traces", other, KEY_B)
      const otherFork = (await (
        await local.post(
          "/api/v1/forks",
          { trace_id: other.id, fork_point_span_id: otherSpan.id, modified_input: 1 },
          KEY_B
        )
      ).json()) as any
      expect((await local.post(`/api/v1/forks/${otherFork.id}/replay`, {}, KEY_B)).status).toBe(200)
    } finally {
      await local.stop()
    }
  }, 60_000)

  test("any number of concurrent replays of one fork: exactly one 200 per generation, the others 409 replay_in_progress", async () => {
    const run = await recordRun()
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 8 }), async (n) => {
        const { body: fork } = await createFork({
          trace_id: run.t.id,
          fork_point_span_id: run.plan.id,
          modified_input: "x"
        })
        next = () => ({ delayMs: 150 })
        const responses = await Promise.all(
          Array.from({ length: n }, () => server.post(`/api/v1/forks/${fork.id}/replay`, {}))
        )
        next = () => undefined
        const wins = responses.filter((r) => r.status === 200)
        expect(wins.length).toBe(1)
        expect(responses.filter((r) => r.status === 409).length).toBe(n - 1)
        for (const r of responses.filter((r) => r.status === 409)) {
          expect(await r.json()).toMatchObject({ code: "replay_in_progress", retryable: true })
        }
        expect((await (await server.get(`/api/v1/forks/${fork.id}`)).json()) as any).toMatchObject({
          generation: 1,
          status: "completed"
        })
      }),
      { numRuns: 6 }
    )
  }, 60_000)
})

describe("long and abandoned replays", () => {
  test("a replay with more model calls than run inline continues as a durable job and completes the fork", async () => {
    const local = await startTestServer({
      TAPEDECK_LLM_BASE_URL: fake.baseUrl,
      TAPEDECK_REPLAY_INLINE_MAX_MODEL_CALLS: "1"
    })
    try {
      const a = span({ name: "a", model: "gpt-4o-mini", input: "one", started_at: "2026-01-01T00:00:01.000Z" })
      const b = span({ name: "b", model: "gpt-4o-mini", input: "two", started_at: "2026-01-01T00:00:02.000Z" })
      const t = trace({ spans: [a, b] })
      await local.post("/api/v1/traces", t)
      const fork = (await (
        await local.post("/api/v1/forks", { trace_id: t.id, fork_point_span_id: a.id, modified_input: "uno" })
      ).json()) as any
      const started = (await (await local.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
      expect(started).toMatchObject({ status: "replaying", mode: "server", fork_id: fork.id })
      let state: any
      for (let i = 0; i < 100; i++) {
        state = await (await local.get(`/api/v1/forks/${fork.id}`)).json()
        if (state.status !== "replaying") break
        await Bun.sleep(50)
      }
      expect(state).toMatchObject({ status: "completed", resultTraceId: started.result_trace_id })
      const result = (await (await local.get(`/api/v1/traces/${started.result_trace_id}`)).json()) as any
      expect(
        result.spans.filter((s: any) => s.span_type === "llm_call").every((s: any) => s.metadata?.replay?.reexecuted)
      ).toBe(true)
    } finally {
      await local.stop()
    }
  }, 60_000)

  test("a generation left replaying by a dead instance is taken over after the replay timeout", async () => {
    const run = await recordRun()
    const { body: fork } = await createFork({
      trace_id: run.t.id,
      fork_point_span_id: run.answer.id,
      modified_input: "x"
    })
    await server.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const execution = crypto.randomUUID()
        yield* sql`UPDATE forks SET status = 'replaying', generation = 1, execution_id = ${execution} WHERE id = ${fork.id}`
        yield* sql`
        INSERT INTO replay_generations (execution_id, fork_id, account_id, generation, mode, status, result_trace_id, usage_month, created_at)
        SELECT ${execution}, id, account_id, 1, 'server', 'replaying', ${crypto.randomUUID()}, '2026-01', now() - interval '2 hours'
        FROM forks WHERE id = ${fork.id}`
      }).pipe(Effect.orDie)
    )
    const response = await server.post(`/api/v1/forks/${fork.id}/replay`, {})
    expect(response.status).toBe(200)
    expect(((await response.json()) as any).status).toBe("completed")
  })
})

describe("review fixes", () => {
  const jobsFor = (traceId: string) =>
    server.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{
          n: number
        }>`SELECT count(*)::int AS n FROM jobs WHERE kind = 'trace.terminal' AND payload->>'traceId' = ${traceId}`
        return rows[0]!.n
      }).pipe(Effect.orDie)
    )

  test("a replay with no body at all (no Content-Length) is accepted; its result gets the terminal-trace job", async () => {
    const run = await recordRun()
    const { body: fork } = await createFork({
      trace_id: run.t.id,
      fork_point_span_id: run.answer.id,
      modified_input: "x"
    })
    const url = new URL(server.url)
    const raw = await new Promise<string>((resolve, reject) => {
      let text = ""
      Bun.connect({
        hostname: url.hostname,
        port: Number(url.port),
        socket: {
          open: (s) =>
            void s.write(
              `POST /api/v1/forks/${fork.id}/replay HTTP/1.1\r\nHost: x\r\nx-service-key: ${KEY_A}\r\nConnection: close\r\n\r\n`
            ),
          data: (_s, data) => void (text += data.toString()),
          close: () => resolve(text),
          error: (_s, e) => reject(e)
        }
      }).catch(reject)
    })
    expect(raw.startsWith("HTTP/1.1 200")).toBe(true)
    const result = JSON.parse(
      raw
        .slice(raw.indexOf("\r\n\r\n") + 4)
        .replace(/^[0-9a-f]+\r\n/, "")
        .replace(/\r\n0\r\n\r\n$/, "")
    )
    expect(result.status).toBe("completed")
    expect(await jobsFor(result.result_trace_id)).toBe(1)
  })

  test("a trace too large to replay fails before any model call and spends nothing", async () => {
    const root = span({ name: "plan", model: "gpt-4o-mini", input: "hi" })
    const t = trace({
      spans: [root, ...Array.from({ length: 999 }, () => span({ parent_id: root.id, span_type: "action" }))]
    })
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    const { body: fork } = await createFork({ trace_id: t.id, fork_point_span_id: root.id, modified_input: "x" })
    const calls = fake.requests.length
    const result = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(result.status).toBe("failed")
    expect(result.error).toContain("up to 999 spans")
    expect(fake.requests.length).toBe(calls)
  })

  test("a tool named like an Object.prototype member is not taken for a mocked one", async () => {
    const root = span({ span_type: "action", name: "agent" })
    const weird = span({ parent_id: root.id, span_type: "tool_call", name: "toString", output: "recorded" })
    const t = trace({ spans: [root, weird] })
    await server.post("/api/v1/traces", t)
    const { body: fork } = await createFork({ trace_id: t.id, fork_point_span_id: weird.id, modified_input: "x" })
    const result = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(result.fidelity_caveats).toContain(
      "tool 'toString' output reused from the recording; side effects were not re-run"
    )
    const stored = (await (await server.get(`/api/v1/traces/${result.result_trace_id}`)).json()) as any
    expect(stored.spans.find((s: any) => s.name === "toString").output).toBe("recorded")
  })

  test("an inline replay whose client hangs up still reaches an outcome", async () => {
    const run = await recordRun()
    const { body: fork } = await createFork({
      trace_id: run.t.id,
      fork_point_span_id: run.plan.id,
      modified_input: "x"
    })
    next = () => ({ delayMs: 400 })
    const abort = new AbortController()
    const pending = fetch(`${server.url}/api/v1/forks/${fork.id}/replay`, {
      method: "POST",
      headers: { "x-service-key": KEY_A },
      signal: abort.signal
    }).catch(() => undefined)
    await Bun.sleep(100)
    abort.abort()
    await pending
    let state: any
    for (let i = 0; i < 60; i++) {
      state = await (await server.get(`/api/v1/forks/${fork.id}`)).json()
      if (state.status !== "replaying") break
      await Bun.sleep(50)
    }
    next = () => undefined
    expect(state.status).toBe("completed")
  })
})
