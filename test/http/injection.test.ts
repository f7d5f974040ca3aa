import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { span, trace, uuid } from "../support/Fixtures.ts"
import { isErrorBody } from "../support/OpenApiFuzz.ts"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"

/**
 * SQL-injection and escaping strings through every string field of the main create routes: each is stored and
 * read back verbatim, or refused whole with a 400 (NUL characters and unpaired surrogates, which PostgreSQL
 * cannot store); the tables keep working and the other account's data is untouched.
 */
const INJECTIONS = [
  "'; DROP TABLE spans; --",
  "' OR '1'='1",
  '" OR ""="',
  "Robert'); DROP TABLE traces;--",
  "'||(SELECT current_user)||'",
  "1; SELECT pg_sleep(10); --",
  "%' OR 1=1 --",
  "%",
  "_",
  "%_%",
  "\\x00",
  "\\u0000",
  "\\",
  "\\'",
  "E'\\\\x41'",
  "$$",
  "$1",
  "$tag$ DROP TABLE traces $tag$",
  "/* */ -- ",
  "NULL",
  "null",
  "{}",
  '["a"]',
  "\u202eevil\u202c",
  "\u200b\ufeff",
  "😀👩‍👩‍👧",
  "ß Ω ∑ 中文 עברית",
  "\r\n\t",
  "a\u0000b", // NUL: refused with a 400
  "\ud800" // an unpaired surrogate: refused with a 400
]
const unstorable = (s: string) => s.includes("\u0000") || !s.isWellFormed()

let server: TestServer
const json = JSON.stringify
const read = async (r: Promise<Response>) => {
  const response = await r
  const text = await response.text()
  return { status: response.status, body: text.length > 0 ? JSON.parse(text) : undefined, text }
}
/** 200 and stored, or a 400 with the error body. Returns the body when accepted. */
const acceptedOrRefused = async (label: string, value: string, r: Promise<Response>, ok = 200) => {
  const { status, body, text } = await read(r)
  if (unstorable(value)) {
    expect(`${label} ${json(value)} → ${status}`).toBe(`${label} ${json(value)} → 400`)
    expect(isErrorBody(body)).toBe(true)
    return undefined
  }
  if (status !== ok) throw new Error(`${label} ${json(value)} → ${status} ${text}`)
  return body as any
}

/** Account B's view of every table, to compare before and after. */
const snapshotB = async () => {
  const get = async (path: string) => (await read(server.get(path, KEY_B))).body
  return {
    traces: await get("/api/v1/traces?limit=100"),
    sessions: await get("/api/v1/sessions"),
    evaluations: await get("/api/v1/evaluations"),
    rules: await get("/api/v1/eval-rules"),
    guardrails: await get("/api/v1/guardrails"),
    keys: (await get("/api/v1/api-keys")).items.map((k: any) => k.id),
    decisions: (await get("/api/v1/enforcement/decisions?limit=500")).items.length,
    trace: await get(`/api/v1/traces/${bTrace.id}`)
  }
}
const bTrace = trace({ name: "b's", session_id: "b-session", spans: [span({ name: "b span" })] })
let before: Awaited<ReturnType<typeof snapshotB>>
let evaluationId: string

beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000" })
  expect((await server.post("/api/v1/traces", bTrace, KEY_B)).status).toBe(200)
  expect(
    (await server.post("/api/v1/evaluations", { name: "b eval", criteria: [{ name: "c", description: "d" }] }, KEY_B))
      .status
  ).toBe(200)
  expect((await server.post("/api/v1/guardrails", { type: "max_steps", params: { max_steps: 5 } }, KEY_B)).status).toBe(
    200
  )
  expect((await server.post("/api/v1/enforcement/check", { run_id: "b-run" }, KEY_B)).status).toBe(200)
  before = await snapshotB()
  evaluationId = (
    await read(server.post("/api/v1/evaluations", { name: "a eval", criteria: [{ name: "c", description: "d" }] }))
  ).body.id
}, 60_000)
afterAll(() => server?.stop(), 60_000)

describe("injection strings are data", () => {
  test("traces: name, metadata keys and values, session_id, input, span names, models, agent fields, errors; sessions by that id", async () => {
    let created = 0
    for (const s of INJECTIONS) {
      const sp = span({
        name: s,
        model: s.slice(0, 100),
        input: s,
        output: { [s]: s },
        agent_id: s,
        agent_role: s,
        error: s,
        metadata: { [s]: [s] }
      })
      const t = trace({
        name: s,
        session_id: s.slice(0, 100),
        input: { q: s },
        metadata: { [s]: s, nested: { v: s } },
        spans: [sp]
      })
      const body = await acceptedOrRefused("POST /api/v1/traces", s, server.post("/api/v1/traces", t))
      if (body === undefined) {
        expect((await server.get(`/api/v1/traces/${t.id}`)).status).toBe(404) // nothing half-written
        continue
      }
      created++
      const { body: got } = await read(server.get(`/api/v1/traces/${t.id}`))
      expect(got).toMatchObject({
        name: s,
        sessionId: s.slice(0, 100),
        input: { q: s },
        metadata: { [s]: s, nested: { v: s } }
      })
      expect(got.spans[0]).toMatchObject({
        name: s,
        model: s.slice(0, 100),
        input: s,
        output: { [s]: s },
        agent_id: s,
        agent_role: s,
        error: s,
        metadata: { [s]: [s] }
      })
      // Appending spans and finishing with the same strings.
      const late = span({ name: `${s} late`, input: s })
      expect((await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [late] })).status).toBe(200)
      expect(
        (await server.request("PATCH", `/api/v1/traces/${t.id}`, { body: { status: "completed", output: s } })).status
      ).toBe(200)
      const { body: after } = await read(server.get(`/api/v1/traces/${t.id}`))
      expect(after.output).toBe(s)
      expect(after.spans.map((x: any) => x.name).sort()).toEqual([s, `${s} late`].sort())
      // The session of that id, by path.
      const session = await read(server.get(`/api/v1/sessions/${encodeURIComponent(s.slice(0, 100))}`))
      expect(`${json(s)} ${session.status}`).toBe(`${json(s)} 200`)
      expect(session.body.id).toBe(s.slice(0, 100))
      expect(session.body.traces.map((x: any) => x.id)).toEqual([t.id])
      const graph = await read(server.get(`/api/v1/sessions/${encodeURIComponent(s.slice(0, 100))}/graph`))
      expect(graph.status).toBe(200)
      expect(graph.body.session_id).toBe(s.slice(0, 100))
      expect(graph.body.nodes.map((n: any) => n.agent_id)).toContain(s)
    }
    // Every accepted trace is listed, nothing else was created or dropped.
    const list = (await read(server.get("/api/v1/traces?limit=100"))).body
    expect(list.total).toBe(created)
    expect(created).toBe(INJECTIONS.filter((s) => !unstorable(s)).length)
  }, 120_000)

  test("session path ids that match no session (injection strings, LIKE wildcards): 404, never another session", async () => {
    for (const s of ["%", "_", "%%", "' OR '1'='1", "b-sess%", "b_session", "B-SESSION", "*"]) {
      if (INJECTIONS.includes(s)) continue // those exist as sessions of A
      const r = await read(server.get(`/api/v1/sessions/${encodeURIComponent(s)}`))
      expect(`${s} ${r.status}`).toBe(`${s} 404`)
    }
    // B's session is not reachable by A through a wildcard either.
    expect((await server.get("/api/v1/sessions/b-session")).status).toBe(404)
  }, 60_000)

  test("search: query and filters.model are data; LIKE wildcards in the model filter match literally", async () => {
    for (const s of INJECTIONS) {
      for (const body of [
        { query: s },
        { query: "step", filters: { model: s } },
        { query: s, filters: { model: s, span_type: "llm_call" } }
      ]) {
        // A query stores nothing: a value PostgreSQL cannot store may be refused (400) or simply match nothing.
        const { status, body: r, text } = await read(server.post("/api/v1/search", body))
        if (unstorable(s) && status === 400) {
          expect(isErrorBody(r)).toBe(true)
          continue
        }
        if (status !== 200) throw new Error(`search ${json(body)} → ${status} ${text}`)
        expect(Array.isArray(r.spans)).toBe(true)
        // Any span returned under a model filter has exactly that model.
        if (body.filters?.model !== undefined) for (const x of r.spans) expect(x.model).toBe(s)
      }
    }
    const b = await read(server.post("/api/v1/search", { query: "' OR '1'='1" }, KEY_B))
    expect(b.status).toBe(200)
    expect(b.body.spans.every((x: any) => x.name === "b span")).toBe(true)
  }, 120_000)

  test("evaluations: name, description, criteria names and descriptions, judge model", async () => {
    for (const s of INJECTIONS) {
      const request = {
        name: s,
        description: s,
        judge_model: s.slice(0, 100),
        criteria: [{ name: s.slice(0, 100), description: s }]
      }
      const created = await acceptedOrRefused(
        "POST /api/v1/evaluations",
        s,
        server.post("/api/v1/evaluations", request)
      )
      if (created === undefined) continue
      const { body } = await read(server.get(`/api/v1/evaluations/${created.id}`))
      expect(body).toMatchObject({
        name: s,
        description: s,
        judgeModel: s.slice(0, 100),
        criteria: [{ name: s.slice(0, 100), description: s }]
      })
    }
  }, 60_000)

  test("eval rules: name, name_pattern, metadata filter; the pattern matches as a glob, never as SQL LIKE", async () => {
    for (const s of INJECTIONS) {
      const request = { evaluation_id: evaluationId, name: s, filter: { name_pattern: s, metadata: { [s]: s } } }
      const created = await acceptedOrRefused("POST /api/v1/eval-rules", s, server.post("/api/v1/eval-rules", request))
      if (created === undefined) continue
      const { body } = await read(server.get(`/api/v1/eval-rules/${created.id}`))
      expect(body).toMatchObject({ name: s, filter: { name_pattern: s, metadata: { [s]: s } } })
    }
  }, 60_000)

  test("guardrails and enforcement: patterns, names, run_id, tool_name, model, args hash; decisions listed by that run_id", async () => {
    for (const s of INJECTIONS) {
      const policy = {
        type: "tool_denylist",
        name: s,
        params: { patterns: [s.replaceAll("*", "").replaceAll("?", "") || "x"] }
      }
      const created = await acceptedOrRefused("POST /api/v1/guardrails", s, server.post("/api/v1/guardrails", policy))
      if (created !== undefined) {
        const { body } = await read(server.get(`/api/v1/guardrails/${created.id}`))
        expect(body).toMatchObject({ name: s, params: policy.params })
      }
      const check = {
        run_id: s.slice(0, 200) || "x",
        tool_name: policy.params.patterns[0]!,
        model: s,
        tool_args_hash: s
      }
      const decision = await acceptedOrRefused(
        "POST /api/v1/enforcement/check",
        s,
        server.post("/api/v1/enforcement/check", check)
      )
      if (decision === undefined) continue
      // The tool name equals a denied pattern without glob characters: blocked by it, exactly.
      expect(decision).toMatchObject({ verdict: "block", policy_id: created.id })
      const listed = await read(server.get(`/api/v1/enforcement/decisions?run_id=${encodeURIComponent(check.run_id)}`))
      expect(listed.status).toBe(200)
      expect(listed.body.items.length).toBeGreaterThanOrEqual(1)
      for (const d of listed.body.items) expect(d.run_id ?? d.runId).toBe(check.run_id)
      if (created !== undefined) {
        expect((await server.request("DELETE", `/api/v1/guardrails/${created.id}`)).status).toBe(200)
      }
    }
    // LIKE wildcards in a denylist pattern are literal characters: "%" and "_" deny only themselves.
    const like = (
      await read(server.post("/api/v1/guardrails", { type: "tool_denylist", params: { patterns: ["%", "a_c"] } }))
    ).body
    const verdict = async (tool: string) =>
      (await read(server.post("/api/v1/enforcement/check", { run_id: uuid(), tool_name: tool }))).body.verdict
    expect(await verdict("anything")).toBe("allow")
    expect(await verdict("abc")).toBe("allow")
    expect(await verdict("%")).toBe("block")
    expect(await verdict("a_c")).toBe("block")
    expect((await server.request("DELETE", `/api/v1/guardrails/${like.id}`)).status).toBe(200)
  }, 120_000)

  test("forks (name, description, modified input, mock outputs) and hold decisions (reason)", async () => {
    const sp = span({ name: "fork here" })
    const t = trace({ spans: [sp] })
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    const approval = (
      await read(
        server.post("/api/v1/guardrails", { type: "require_approval", params: { tool_patterns: ["needs_ok"] } })
      )
    ).body
    for (const s of INJECTIONS) {
      const request = {
        trace_id: t.id,
        fork_point_span_id: sp.id,
        modified_input: { [s]: s },
        name: s,
        description: s,
        mock_outputs: { [s]: s }
      }
      const fork = await acceptedOrRefused("POST /api/v1/forks", s, server.post("/api/v1/forks", request))
      if (fork !== undefined) {
        const { body } = await read(server.get(`/api/v1/forks/${fork.id}`))
        expect(body).toMatchObject({ name: s, description: s, modifiedInput: { [s]: s } })
      }
      const held = (await read(server.post("/api/v1/enforcement/check", { run_id: uuid(), tool_name: "needs_ok" })))
        .body
      expect(held.verdict).toBe("hold")
      const decided = await acceptedOrRefused(
        "POST …/deny",
        s,
        server.post(`/api/v1/enforcement/holds/${held.hold_id}/deny`, { reason: s })
      )
      if (decided !== undefined) expect(decided).toMatchObject({ status: "denied", reason: s })
    }
    expect((await server.request("DELETE", `/api/v1/guardrails/${approval.id}`)).status).toBe(200)
  }, 60_000)

  test("api keys: the name is stored and listed verbatim; the new key works", async () => {
    for (const s of INJECTIONS) {
      const name = s.trim() === "" ? `k${s}` : s
      const created = await acceptedOrRefused("POST /api/v1/api-keys", name, server.post("/api/v1/api-keys", { name }))
      if (created === undefined) continue
      const { body } = await read(server.get("/api/v1/api-keys"))
      expect(body.items.find((k: any) => k.id === created.id)?.name).toBe(name)
      expect((await server.get("/api/v1/usage", created.key)).status).toBe(200)
      expect((await server.request("DELETE", `/api/v1/api-keys/${created.id}`)).status).toBe(200)
    }
  }, 60_000)

  test("generated strings (any unicode, quotes, backslashes, dollar quotes) round-trip through trace and span names", async () => {
    const piece = fc.oneof(
      fc.constantFrom("'", '"', "\\", "$$", "--", ";", "%", "_", "\u0000", "\ud800", "\\x00", "$1", "*/", "/*"),
      fc.fullUnicodeString({ maxLength: 6 }),
      fc.string({ maxLength: 6 })
    )
    const value = fc.array(piece, { minLength: 1, maxLength: 8 }).map((parts) => parts.join("").slice(0, 100))
    for (const s of fc.sample(value, { numRuns: 60, seed: 4242 })) {
      const t = trace({ name: s, session_id: s, metadata: { [s]: s }, spans: [span({ name: s, input: s })] })
      const accepted = await acceptedOrRefused("POST /api/v1/traces", s, server.post("/api/v1/traces", t))
      if (accepted === undefined) {
        expect((await server.get(`/api/v1/traces/${t.id}`)).status).toBe(404)
        continue
      }
      const { body } = await read(server.get(`/api/v1/traces/${t.id}`))
      expect(body).toMatchObject({ name: s, sessionId: s, metadata: { [s]: s } })
      expect(body.spans[0]).toMatchObject({ name: s, input: s })
    }
  }, 120_000)

  test("afterwards every table still works, and account B's data is exactly as it was", async () => {
    expect(await snapshotB()).toEqual(before)
    const t = trace({ name: "after", spans: [span({ name: "after span" })] })
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    expect((await read(server.get(`/api/v1/traces/${t.id}`))).body.spans.length).toBe(1)
    expect((await server.post("/api/v1/search", { query: "after span" })).status).toBe(200)
    expect(
      (await server.post("/api/v1/evaluations", { name: "after", criteria: [{ name: "c", description: "d" }] })).status
    ).toBe(200)
    expect((await server.post("/api/v1/enforcement/check", { run_id: "after" })).status).toBe(200)
    expect((await server.get("/api/v1/usage", KEY_A)).status).toBe(200)
    expect((await read(server.get("/api/v1/usage", KEY_B))).body.traces).toEqual({ recorded: 1, spans: 1 })
  }, 60_000)
})
