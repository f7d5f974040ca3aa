import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Schema } from "effect"
import { TraceDetail, TraceList } from "#src/domain/Trace"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
})
afterAll(() => server.stop())

const expectError = async (response: Response, status: number, code: string) => {
  expect(response.status).toBe(status)
  const body = (await response.json()) as Record<string, unknown>
  expect(body.code).toBe(code)
  expect(typeof body.error).toBe("string")
  expect(typeof body.retryable).toBe("boolean")
  return body
}

/** GET a trace's detail, checking the body against the contract's TraceDetail schema. */
const getDetail = async (id: string, key = KEY_A): Promise<any> => {
  const response = await server.get(`/api/v1/traces/${id}`, key)
  expect(response.status).toBe(200)
  const body = await response.json()
  Schema.decodeUnknownSync(TraceDetail)(body)
  return body
}

const create = async (body: Record<string, unknown>, key = KEY_A) => {
  const response = await server.post("/api/v1/traces", body, key)
  return { response, body: (await response.clone().json()) as Record<string, any> }
}

describe("POST /api/v1/traces", () => {
  test("creates a trace with spans and returns {id, status: created}", async () => {
    const t = trace({ name: "checkout", spans: [span()] })
    const { response, body } = await create(t)
    expect(response.status).toBe(200)
    expect(body).toEqual({ id: t.id, status: "created" })
  })

  test("a duplicate id is 409 conflict, whoever owns it, and nothing is overwritten", async () => {
    const t = trace({ name: "first" })
    await create(t)
    await expectError((await create({ ...t, name: "second" })).response, 409, "conflict")
    await expectError((await create({ ...t, name: "third" }, KEY_B)).response, 409, "conflict")
    const detail = await getDetail(t.id)
    expect(detail.name).toBe("first")
  })

  test("a trace of many spans keeps any text exactly, derives its totals, and a taken id leaves it untouched", async () => {
    // Text that quoting in JSON, SQL literals or COPY's text format must get right.
    const hostile = [
      "\\N",
      "\\",
      "a\tb",
      "line\nbreak\r\n",
      "back\\slash\\n",
      'quote"d',
      "it's",
      "\\.",
      "$1 $$",
      "ünïcødé ✓ 🙂"
    ]
    const spans = Array.from({ length: 25 }, (_, i) =>
      span({
        name: hostile[i % hostile.length],
        model: hostile[(i + 1) % hostile.length],
        input: { text: hostile[(i + 2) % hostile.length], all: hostile },
        output: i % 3 === 0 ? null : hostile[(i + 3) % hostile.length],
        metadata: { [hostile[i % hostile.length]!]: hostile[(i + 4) % hostile.length] },
        error: hostile[(i + 5) % hostile.length],
        input_tokens: i,
        output_tokens: 2 * i,
        cost: 0.1,
        started_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
        ...(i % 2 === 0 ? { vendor_field: hostile[(i + 6) % hostile.length] } : {})
      })
    )
    const fields = { name: hostile[3]!, input: hostile, session_id: "it's \\ $1" }
    const t = trace({ ...fields, status: "completed", spans })
    const { response } = await create(t)
    expect(response.status).toBe(200)
    const detail = await getDetail(t.id)
    expect(detail.spans).toEqual(spans)
    expect([detail.name, detail.input, detail.sessionId, detail.status]).toEqual([
      fields.name,
      fields.input,
      fields.session_id,
      "completed"
    ])
    expect([detail.totalTokens, detail.totalCost, detail.spanCount, detail.totalDurationMs]).toEqual([
      900,
      "2.5",
      25,
      24_000
    ])
    // A second create of the same id with other spans: 409 from either account, and none of its spans stay.
    const again = { ...t, name: "second", spans: spans.map((s) => ({ ...s, id: uuid() })) }
    await expectError((await create(again)).response, 409, "conflict")
    await expectError((await create(again, KEY_B)).response, 409, "conflict")
    const after = await getDetail(t.id)
    expect(after.spans).toEqual(spans)
    expect([after.name, after.spanCount]).toEqual([fields.name, 25])
  })

  test("a span's payloads come back as sent, keys in the client's order", async () => {
    // Key orders jsonb would have changed (it sorts by length, then bytes).
    const spans = Array.from({ length: 30 }, (_, i) => ({
      ...span({ started_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString() }),
      input: { zeta_long_key: i, b: { y: 2, x: [3, { d: 1, c: null }] }, a: "first?" },
      output: { role: "assistant", content: "done", finish_reason: "stop" },
      metadata: { "service.name": "agent", a: 1 },
      vendor_zz: true,
      vendor_a: false
    }))
    const t = trace({ spans })
    expect((await create(t)).response.status).toBe(200)
    const detail = (await getDetail(t.id)) as { spans: Array<(typeof spans)[number]> }
    expect(detail.spans).toEqual(spans)
    for (const got of detail.spans) {
      expect(Object.keys(got.input)).toEqual(["zeta_long_key", "b", "a"])
      expect(Object.keys(got.input.b)).toEqual(["y", "x"])
      expect(Object.keys(got.input.b.x[1] as object)).toEqual(["d", "c"])
      expect(Object.keys(got.output)).toEqual(["role", "content", "finish_reason"])
      expect(Object.keys(got.metadata)).toEqual(["service.name", "a"])
    }
  })

  test("status defaults to running; totals are derived from the spans when omitted", async () => {
    const root = span({
      input_tokens: 10,
      output_tokens: 5,
      cost: 0.1,
      started_at: "2026-01-01T00:00:00.000Z",
      ended_at: "2026-01-01T00:00:03.000Z"
    })
    const child = span({
      parent_id: root.id,
      input_tokens: 7,
      cost: 0.2,
      started_at: "2026-01-01T00:00:01.000Z",
      duration_ms: 4000
    })
    const t = trace({ spans: [root, child] })
    await create(t)
    const detail = await getDetail(t.id)
    expect(detail.status).toBe("running")
    expect(detail.totalTokens).toBe(22)
    expect(detail.totalCost).toBe("0.3")
    expect(detail.totalDurationMs).toBe(5000)
    expect(detail.spanCount).toBe(2)
  })

  test("explicit totals win over derived ones; totalCost is an exact decimal string", async () => {
    const t = trace({
      total_tokens: 5,
      total_cost: 0.000001,
      total_duration_ms: 9,
      spans: [span({ input_tokens: 100, cost: 3 })]
    })
    await create(t)
    const detail = await getDetail(t.id)
    expect([detail.totalTokens, detail.totalCost, detail.totalDurationMs]).toEqual([5, "0.000001", 9])
  })

  test("strict body: unknown fields, wrong types, bad enums and malformed JSON are 400 naming the field", async () => {
    const cases: Array<[unknown, string]> = [
      [{ ...trace(), colour: "red" }, "colour"],
      [{ ...trace(), status: "done" }, "status"],
      [{ ...trace(), total_tokens: -1 }, "total_tokens"],
      [{ ...trace(), total_tokens: 1.5 }, "total_tokens"],
      [{ ...trace(), id: "nope" }, "id"],
      [{ ...trace(), started_at: "yesterday" }, "started_at"],
      [{ started_at: "2026-01-01T00:00:00Z" }, "id"],
      [{ ...trace(), spans: [span({ span_type: "thinking" })] }, "spans.0.span_type"],
      [{ ...trace(), spans: [{ ...span(), parent_id: undefined }] }, "spans.0.parent_id"],
      [{ ...trace(), metadata: [] }, "metadata"],
      [{ ...trace(), name: "a\u0000b" }, "name"],
      [{ ...trace(), input: { text: "\ud800" } }, "input"],
      [JSON.stringify(trace()).replace(/^\{/, '{"output":[1e400],'), "output"]
    ]
    for (const [body, field] of cases) {
      const error = await expectError(await server.post("/api/v1/traces", body), 400, "validation_failed")
      expect(String(error.error)).toContain(field)
    }
    await expectError(await server.post("/api/v1/traces", '{"id":'), 400, "validation_failed")
    await expectError(await server.post("/api/v1/traces", "[]"), 400, "validation_failed")
  })

  test("span batches: duplicate ids and dangling parents are 400 and write nothing", async () => {
    const a = span()
    const t1 = trace({ spans: [a, { ...span(), id: a.id }] })
    expect(String((await expectError((await create(t1)).response, 400, "validation_failed")).error)).toContain(
      "duplicate"
    )
    const t2 = trace({ spans: [span({ parent_id: uuid() })] })
    expect(String((await expectError((await create(t2)).response, 400, "validation_failed")).error)).toContain(
      "parent_id"
    )
    for (const t of [t1, t2]) expect((await server.get(`/api/v1/traces/${t.id}`)).status).toBe(404)
  })

  test("limits: each boundary passes at the limit and fails one past it", async () => {
    const ok = async (body: Record<string, unknown>) => expect((await create(body)).response.status).toBe(200)
    const bad = async (body: Record<string, unknown>) =>
      expectError((await create(body)).response, 400, "validation_failed")
    await ok(trace({ name: "n".repeat(500) }))
    await bad(trace({ name: "n".repeat(501) }))
    await ok(trace({ session_id: "s".repeat(100) }))
    await bad(trace({ session_id: "s".repeat(101) }))
    await ok(trace({ spans: [span({ name: "n".repeat(500), model: "m".repeat(100) })] }))
    await bad(trace({ spans: [span({ name: "n".repeat(501) })] }))
    await bad(trace({ spans: [span({ model: "m".repeat(101) })] }))
    await ok(trace({ spans: Array.from({ length: 1000 }, () => span()) }))
    await bad(trace({ spans: Array.from({ length: 1001 }, () => span()) }))
  })
})

describe("GET /api/v1/traces/{traceId}", () => {
  test("round-trips every span field, additional properties included", async () => {
    const root = span({
      span_type: "llm_call",
      name: "plan",
      model: "gpt-4o",
      input: { messages: [{ role: "user", content: "hi" }] },
      output: null,
      input_tokens: 12,
      output_tokens: 34,
      cost: 0.0123,
      duration_ms: 1500,
      metadata: { k: [1, "2"] },
      agent_id: "planner",
      parent_agent_id: "root",
      agent_role: "planner",
      started_at: "2026-01-01T00:00:00.123Z",
      ended_at: "2026-01-01T00:00:01.623Z",
      error: "boom",
      vendor_field: { nested: true }
    })
    const t = trace({
      spans: [root],
      input: "question",
      output: [1, 2],
      metadata: { env: "x" },
      session_id: "sess",
      lossy: true
    })
    await create(t)
    const detail = await getDetail(t.id)
    expect(detail.spans).toEqual([root])
    expect(detail.input).toBe("question")
    expect(detail.output).toEqual([1, 2])
    expect(detail.sessionId).toBe("sess")
    expect(detail.lossy).toBe(true)
    expect(detail.startedAt).toBe("2026-01-01T00:00:00.000Z")
    expect(detail.endedAt).toBeNull()
    expect(detail.causalOrder).toEqual([root.id])
    expect(detail.concurrentGroups).toEqual([])
  })

  test("orders spans by start time then causal position, with causal order and concurrent groups", async () => {
    const root = span({ name: "root", started_at: "2026-01-01T00:00:00.000Z", ended_at: "2026-01-01T00:00:10.000Z" })
    const a = span({
      name: "a",
      parent_id: root.id,
      started_at: "2026-01-01T00:00:01.000Z",
      ended_at: "2026-01-01T00:00:05.000Z"
    })
    const b = span({
      name: "b",
      parent_id: root.id,
      started_at: "2026-01-01T00:00:02.000Z",
      ended_at: "2026-01-01T00:00:03.000Z"
    })
    const c = span({
      name: "c",
      parent_id: root.id,
      started_at: "2026-01-01T00:00:06.000Z",
      ended_at: "2026-01-01T00:00:07.000Z"
    })
    const a1 = span({ name: "a1", parent_id: a.id, started_at: "2026-01-01T00:00:01.000Z" })
    const t = trace({ spans: [c, a1, b, a, root] })
    await create(t)
    const detail = await getDetail(t.id)
    expect(detail.spans.map((s: any) => s.name)).toEqual(["root", "a", "a1", "b", "c"])
    expect(detail.causalOrder).toEqual([root.id, a.id, a1.id, b.id, c.id])
    expect(detail.concurrentGroups).toEqual([[a.id, b.id]])
  })

  test("a non-UUID id is 400; a missing one 404", async () => {
    await expectError(await server.get("/api/v1/traces/not-a-uuid"), 400, "validation_failed")
    await expectError(await server.get(`/api/v1/traces/${uuid()}`), 404, "not_found")
  })
})

describe("GET /api/v1/traces", () => {
  test("newest first by startedAt then id, exact total, hasMore, and a keyset cursor that walks every page", async () => {
    const local = await startTestServer()
    try {
      const ids: Array<string> = []
      for (let i = 0; i < 7; i++) {
        const t = trace({ started_at: `2026-02-0${1 + (i % 3)}T00:00:00.000Z` })
        ids.push(t.id)
        expect((await local.post("/api/v1/traces", t)).status).toBe(200)
      }
      const page = async (query: string): Promise<any> => {
        const body = await (await local.get(`/api/v1/traces?${query}`)).json()
        Schema.decodeUnknownSync(TraceList, { onExcessProperty: "error" })(body)
        return body
      }
      const first = await page("limit=3")
      expect(first.total).toBe(7)
      expect(first.limit).toBe(3)
      expect(first.offset).toBe(0)
      expect(first.hasMore).toBe(true)
      const seen: Array<any> = [...first.items]
      let cursor = first.nextCursor
      while (cursor) {
        const next = await page(`limit=3&cursor=${cursor}`)
        seen.push(...next.items)
        cursor = next.nextCursor
        if (!next.hasMore) expect(next.nextCursor).toBeUndefined()
      }
      expect(seen.length).toBe(7)
      const sorted = [...seen].sort((x, y) => y.startedAt.localeCompare(x.startedAt) || y.id.localeCompare(x.id))
      expect(seen.map((t) => t.id)).toEqual(sorted.map((t) => t.id))
      const byOffset = await page("limit=3&offset=3")
      expect(byOffset.items.map((t: any) => t.id)).toEqual(sorted.slice(3, 6).map((t) => t.id))
      const last = await page("limit=100&offset=6")
      expect(last.items.length).toBe(1)
      expect(last.hasMore).toBe(false)
      expect(Object.keys(last).sort()).toEqual(["hasMore", "items", "limit", "offset", "total"])
    } finally {
      await local.stop()
    }
  }, 60_000)

  test("env=sandbox lists only sandbox traces; without env only the others", async () => {
    const sandbox = trace({ metadata: { environment: "sandbox" } })
    const production = trace()
    await create(sandbox)
    await create(production)
    const ids = async (query: string) =>
      (((await (await server.get(`/api/v1/traces?limit=100${query}`)).json()) as any).items as Array<any>).map(
        (t) => t.id
      )
    expect(await ids("&env=sandbox")).toContain(sandbox.id)
    expect(await ids("&env=sandbox")).not.toContain(production.id)
    expect(await ids("")).toContain(production.id)
    expect(await ids("")).not.toContain(sandbox.id)
  })

  test("query boundaries: limit 1..100, offset >= 0, env only sandbox, unknown parameters and bad cursors refused", async () => {
    for (const ok of ["limit=1", "limit=100", "offset=0", "offset=5", "env=sandbox"]) {
      expect((await server.get(`/api/v1/traces?${ok}`)).status).toBe(200)
    }
    for (const bad of [
      "limit=0",
      "limit=101",
      "limit=abc",
      "limit=1.5",
      "offset=-1",
      "env=production",
      "cursor=zzz",
      "colour=red",
      "offset=0x10",
      "limit=+5",
      "limit=%205",
      "limit=1e2",
      "offset=5%20"
    ]) {
      await expectError(await server.get(`/api/v1/traces?${bad}`), 400, "validation_failed")
    }
  })
})

describe("POST /api/v1/traces/{traceId}/spans", () => {
  test("appends spans (parents may be stored already), is idempotent on span id and recomputes totals", async () => {
    const root = span({ input_tokens: 1 })
    const t = trace({ spans: [root] })
    await create(t)
    const child = span({ parent_id: root.id, input_tokens: 2 })
    const first = await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [child] })
    expect(first.status).toBe(200)
    expect(await first.json()).toEqual({ id: t.id, spans_written: 1, spanCount: 2 })
    const again = await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [{ ...child, output: "done" }] })
    expect(((await again.json()) as any).spanCount).toBe(2)
    const detail = await getDetail(t.id)
    expect(detail.totalTokens).toBe(3)
    expect(detail.spans.find((s: any) => s.id === child.id).output).toBe("done")
  })

  test("at most 1000 spans per request", async () => {
    const t = trace()
    await create(t)
    const ok = await server.post(`/api/v1/traces/${t.id}/spans`, { spans: Array.from({ length: 1000 }, () => span()) })
    expect(((await ok.json()) as any).spanCount).toBe(1000)
    await expectError(
      await server.post(`/api/v1/traces/${t.id}/spans`, { spans: Array.from({ length: 1001 }, () => span()) }),
      400,
      "validation_failed"
    )
  })

  test("a parent in neither the batch nor the trace is 400; a foreign or missing trace 404", async () => {
    const t = trace()
    await create(t)
    await expectError(
      await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [span({ parent_id: uuid() })] }),
      400,
      "validation_failed"
    )
    await expectError(await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [span()] }, KEY_B), 404, "not_found")
    await expectError(await server.post(`/api/v1/traces/${uuid()}/spans`, { spans: [span()] }), 404, "not_found")
    await expectError(
      await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [], extra: 1 }),
      400,
      "validation_failed"
    )
  })
})

describe("PATCH /api/v1/traces/{traceId}", () => {
  test("records status, output, end time and totals; enqueues the terminal job once per transition", async () => {
    const t = trace({ spans: [span({ input_tokens: 4 })] })
    await create(t)
    const patch = (body: unknown, key = KEY_A) => server.request("PATCH", `/api/v1/traces/${t.id}`, { body, key })
    const first = (await (
      await patch({ status: "completed", output: { answer: 42 }, ended_at: "2026-01-01T00:01:00.000Z" })
    ).json()) as any
    expect(first.status).toBe("updated")
    expect(first.id).toBe(t.id)
    expect(typeof first.jobId).toBe("string")
    const repeat = (await (await patch({ status: "completed" })).json()) as any
    expect(repeat.jobId).toBeUndefined()
    const detail = await getDetail(t.id)
    expect(detail.status).toBe("completed")
    expect(detail.output).toEqual({ answer: 42 })
    expect(detail.endedAt).toBe("2026-01-01T00:01:00.000Z")
    expect(detail.totalDurationMs).toBe(60_000)
    expect(detail.totalTokens).toBe(4)
    const failed = (await (await patch({ status: "failed", total_tokens: 99 })).json()) as any
    expect(typeof failed.jobId).toBe("string")
    expect((await getDetail(t.id)).totalTokens).toBe(99)

    let job: any
    for (let i = 0; i < 100; i++) {
      job = await (await server.get(`/api/v1/jobs/${first.jobId}`)).json()
      if (job.status === "completed") break
      await Bun.sleep(50)
    }
    expect(job).toMatchObject({
      id: first.jobId,
      kind: "trace.terminal",
      status: "completed",
      attempts: 1,
      error: null
    })
    await expectError(await server.get(`/api/v1/jobs/${first.jobId}`, KEY_B), 404, "not_found")
  })

  test("a trace created terminal gets its job at creation", async () => {
    const { body } = await create(trace({ status: "failed" }))
    expect(typeof body.jobId).toBe("string")
    expect((await server.get(`/api/v1/jobs/${body.jobId}`)).status).toBe(200)
  })

  test("strict body and 404 for missing or foreign traces", async () => {
    const t = trace()
    await create(t)
    await expectError(
      await server.request("PATCH", `/api/v1/traces/${t.id}`, { body: { status: "done" } }),
      400,
      "validation_failed"
    )
    await expectError(
      await server.request("PATCH", `/api/v1/traces/${t.id}`, { body: { name: "x" } }),
      400,
      "validation_failed"
    )
    await expectError(
      await server.request("PATCH", `/api/v1/traces/${t.id}`, { body: {}, key: KEY_B }),
      404,
      "not_found"
    )
    await expectError(await server.request("PATCH", `/api/v1/traces/${uuid()}`, { body: {} }), 404, "not_found")
    expect((await server.request("PATCH", `/api/v1/traces/${t.id}`, { body: {} })).status).toBe(200)
  })
})

describe("DELETE /api/v1/traces/{traceId}", () => {
  test("soft-deletes: {deleted: true}, then 404 everywhere and unlisted", async () => {
    const t = trace()
    await create(t)
    await expectError(await server.request("DELETE", `/api/v1/traces/${t.id}`, { key: KEY_B }), 404, "not_found")
    const response = await server.request("DELETE", `/api/v1/traces/${t.id}`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ deleted: true })
    await expectError(await server.get(`/api/v1/traces/${t.id}`), 404, "not_found")
    await expectError(await server.request("DELETE", `/api/v1/traces/${t.id}`), 404, "not_found")
    await expectError(await server.request("PATCH", `/api/v1/traces/${t.id}`, { body: {} }), 404, "not_found")
    await expectError(await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [] }), 404, "not_found")
    const listed = (await (await server.get("/api/v1/traces?limit=100")).json()) as any
    expect(listed.items.map((x: any) => x.id)).not.toContain(t.id)
    await expectError((await create(t)).response, 409, "conflict")
  })
})

describe("isolation between accounts", () => {
  test("every trace route answers another account's trace exactly like a missing one", async () => {
    const t = trace({ spans: [span()] })
    await create(t)
    const foreign = [
      await server.get(`/api/v1/traces/${t.id}`, KEY_B),
      await server.request("PATCH", `/api/v1/traces/${t.id}`, { body: { status: "completed" }, key: KEY_B }),
      await server.request("DELETE", `/api/v1/traces/${t.id}`, { key: KEY_B }),
      await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [] }, KEY_B)
    ]
    for (const response of foreign) {
      expect(response.status).toBe(404)
      expect(await response.json()).toEqual({ error: `trace ${t.id} not found`, code: "not_found", retryable: false })
    }
    const listed = (await (await server.get("/api/v1/traces?limit=100", KEY_B)).json()) as any
    expect(listed.items.map((x: any) => x.id)).not.toContain(t.id)
    expect((await getDetail(t.id)).status).toBe("running")
  })
})

describe("hostile input found in review", () => {
  test("span ids compare case-insensitively: duplicates in two cases are 400, an uppercase parent reference works", async () => {
    const id = uuid()
    const dup = trace({ spans: [span({ id }), span({ id: id.toUpperCase() })] })
    await expectError((await create(dup)).response, 400, "validation_failed")
    const root = span()
    const ok = trace({ spans: [root, span({ parent_id: root.id.toUpperCase() })] })
    expect((await create(ok)).response.status).toBe(200)
    const t = trace({ spans: [span({ id })] })
    await create(t)
    await expectError(
      await server.post(`/api/v1/traces/${t.id}/spans`, {
        spans: [span({ id: uuid() }), span({ id: id.toUpperCase(), parent_id: null }), span({ id })]
      }),
      400,
      "validation_failed"
    )
  })

  test("form and multipart bodies are refused before they are read", async () => {
    for (const contentType of ["multipart/form-data; boundary=xx", "application/x-www-form-urlencoded", "text/plain"]) {
      const response = await server.request("POST", "/api/v1/traces", {
        body: "garbage",
        headers: { "content-type": contentType }
      })
      expect((await expectError(response, 400, "validation_failed")).error).toContain("application/json")
    }
  })

  test("impossible dates and forged cursors are 400, not 500", async () => {
    for (const started_at of ["2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z", "2023-02-29T12:00:00Z"]) {
      await expectError((await create(trace({ started_at }))).response, 400, "validation_failed")
    }
    for (const forged of [
      ["2026-02-31T00:00:00.000Z", uuid()],
      ["0000-01-01T00:00:00.000Z", uuid()],
      ["2026-01-01T00:00:00Z", uuid()]
    ]) {
      const cursor = Buffer.from(JSON.stringify(forged)).toString("base64url")
      await expectError(await server.get(`/api/v1/traces?cursor=${cursor}`), 400, "validation_failed")
    }
  })

  test("a span cannot become its own ancestor, in one batch or by re-parenting a stored span", async () => {
    const a = uuid()
    const b = uuid()
    const cyclic = trace({ spans: [span({ id: a, parent_id: b }), span({ id: b, parent_id: a })] })
    await expectError((await create(cyclic)).response, 400, "validation_failed")
    await expectError(
      (await create(trace({ spans: [span({ id: a, parent_id: a })] }))).response,
      400,
      "validation_failed"
    )
    const root = span()
    const child = span({ parent_id: root.id })
    const t = trace({ spans: [root, child] })
    await create(t)
    const reparent = await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [{ ...root, parent_id: child.id }] })
    expect((await expectError(reparent, 400, "validation_failed")).error).toContain("ancestor")
  })

  test("spans are only added to a running trace; a trace created terminal gets an end time", async () => {
    const root = span({ started_at: "2026-01-01T00:00:00.000Z", ended_at: "2026-01-01T00:00:04.000Z" })
    const t = trace({ status: "completed", spans: [root] })
    await create(t)
    expect((await getDetail(t.id)).endedAt).toBe("2026-01-01T00:00:04.000Z")
    await expectError(await server.post(`/api/v1/traces/${t.id}/spans`, { spans: [span()] }), 409, "conflict")
  })

  test("an additional span property named __proto__ is kept as data", async () => {
    const s = JSON.parse(JSON.stringify(span()).replace(/^\{/, '{"__proto__":{"x":1},'))
    const t = { ...trace(), spans: [s] }
    const response = await server.post(
      "/api/v1/traces",
      JSON.stringify(t).replace('"spans":[{', '"spans":[{"__proto__":{"x":1},')
    )
    expect(response.status).toBe(200)
    const stored = (await getDetail(t.id)).spans[0]
    expect(Object.prototype.hasOwnProperty.call(stored, "__proto__")).toBe(true)
  })
})
