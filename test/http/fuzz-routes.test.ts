import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { otlpProtoRoot } from "#layers/ingest/OtlpDecode"
import { FastCheck as fc } from "effect"
import { span, trace, uuid } from "../support/Fixtures.ts"
import {
  edgePathId,
  edgeScalar,
  fillPath,
  isErrorBody,
  nested,
  type OpenApiDoc,
  type Operation,
  operations,
  pool,
  resolve,
  valid,
  wrongValue
} from "../support/OpenApiFuzz.ts"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"

/**
 * Every operation of the OpenAPI document (and the raw routes it does not list) is sent generated malformed and
 * edge-case bodies, query strings and path ids. Properties: no 5xx, ever; every 4xx carries the error body
 * `{error, code, retryable}`; without credentials every non-public route is a 401.
 */
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31)
const RUNS = Number(process.env.FUZZ_RUNS ?? 16) // per operation and category; FUZZ_RUNS=50 for a long run
const PUBLIC = (path: string) =>
  path === "/health" ||
  path === "/openapi.json" ||
  path === "/docs" ||
  path.startsWith("/.well-known/") ||
  path === "/mcp/docs"

let server: TestServer
let doc: OpenApiDoc
let ops: Array<Operation>
/** Real ids of account A's records, by path parameter, so that fuzzed bodies reach the handlers behind the lookups. */
const ids: Record<string, string> = {}
const idFor = (op: Operation, name: string) => {
  if (name === "id") return op.path.startsWith("/api/v1/guardrails") ? ids.guardrail! : ids.rule!
  return ids[name] ?? uuid()
}

interface Failure {
  readonly label: string
  readonly status: number
  readonly body: string
}
const failures: Array<Failure> = []
let requests = 0

/** Sends one request and records a failure of the properties (a 5xx, or a 4xx without the error body). */
const RpcStatus = otlpProtoRoot.lookupType("google.rpc.Status")

const probe = async (
  label: string,
  path: string,
  init: {
    method: string
    headers?: Record<string, string>
    body?: string | Uint8Array | undefined
    key?: string | null
  },
  options: { jsonRpc?: boolean } = {}
): Promise<{ status: number; body: unknown }> => {
  const headers: Record<string, string> = { ...init.headers }
  const key = init.key === undefined ? KEY_A : init.key
  if (key !== null) headers["x-service-key"] = key
  requests++
  let response: Response
  try {
    response = await fetch(server.url + path, {
      method: init.method,
      headers,
      ...(init.body === undefined ? {} : { body: init.body })
    })
  } catch (e) {
    failures.push({ label, status: 0, body: `request failed: ${String(e)}` })
    return { status: 0, body: undefined }
  }
  if (response.headers.get("content-type") === "application/x-protobuf") {
    // OTLP answers a protobuf export in protobuf: a refusal is a google.rpc.Status with a code and a message.
    const bytes = new Uint8Array(await response.arrayBuffer())
    if (response.status >= 500) failures.push({ label, status: response.status, body: "protobuf" })
    else if (response.status >= 400) {
      const status = RpcStatus.toObject(RpcStatus.decode(bytes)) as { code?: number; message?: string }
      if (!status.code || !status.message)
        failures.push({
          label: `${label} (no google.rpc.Status)`,
          status: response.status,
          body: JSON.stringify(status)
        })
    }
    return { status: response.status, body: undefined }
  }
  const text = await response.text()
  let body: unknown = undefined
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  const jsonRpcError =
    options.jsonRpc === true &&
    typeof body === "object" &&
    body !== null &&
    (body as any).jsonrpc === "2.0" &&
    typeof (body as any).error?.code === "number" &&
    typeof (body as any).error?.message === "string"
  if (response.status >= 500) failures.push({ label, status: response.status, body: text.slice(0, 300) })
  else if (response.status >= 400 && !isErrorBody(body) && !jsonRpcError) {
    failures.push({ label: `${label} (no error body)`, status: response.status, body: text.slice(0, 300) })
  }
  return { status: response.status, body }
}

const report = () => {
  const distinct = new Map<string, Failure>()
  for (const f of failures) distinct.set(`${f.status} ${f.label.split(" | ")[0]}`, f)
  return [...distinct.values()].slice(0, 40).map((f) => `${f.status} ${f.label}: ${f.body}`)
}

const json = JSON.stringify
const ok = async (r: Promise<Response>) => {
  const response = await r
  if (response.status !== 200) throw new Error(`${response.status} ${await response.text()}`)
  return (await response.json()) as any
}

beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000" })
  doc = (await (await server.get("/openapi.json", null)).json()) as OpenApiDoc
  // Deletes last, so that the records stay there for the other operations.
  ops = operations(doc).sort((a, b) => Number(a.method === "DELETE") - Number(b.method === "DELETE"))
  const root = span({ name: "root", span_type: "action" })
  const child = span({ name: "child", parent_id: root.id, span_type: "tool_call", input: { q: 1 } })
  const t = trace({ name: "fuzz-seed", status: "completed", session_id: "fuzz-session", spans: [root, child] })
  const created = await ok(server.post("/api/v1/traces", t))
  ids.traceId = t.id
  ids.sessionId = "fuzz-session"
  ids.jobId = created.jobId
  ids.forkId = (
    await ok(server.post("/api/v1/forks", { trace_id: t.id, fork_point_span_id: child.id, modified_input: "x" }))
  ).id
  ids.evaluationId = (
    await ok(server.post("/api/v1/evaluations", { name: "fuzz", criteria: [{ name: "c", description: "d" }] }))
  ).id
  ids.rule = (await ok(server.post("/api/v1/eval-rules", { evaluation_id: ids.evaluationId, filter: {} }))).id
  ids.guardrail = (
    await ok(server.post("/api/v1/guardrails", { type: "require_approval", params: { tool_patterns: ["danger*"] } }))
  ).id
  ids.holdId = (
    await ok(server.post("/api/v1/enforcement/check", { run_id: "fuzz-run", tool_name: "danger_zone" }))
  ).hold_id
  ids.keyId = (await ok(server.post("/api/v1/api-keys", { name: "fuzz" }))).id
  expect(Object.values(ids).every((v) => typeof v === "string" && v.length > 0)).toBe(true)
}, 120_000)
afterAll(() => server?.stop(), 60_000)
beforeEach(() => {
  failures.length = 0
})

describe("fuzz: every operation of the OpenAPI document", () => {
  test("the document lists the routes we fuzz (a sanity check that the walk covers the API)", () => {
    const listed = new Set(ops.map((o) => `${o.method} ${o.path}`))
    for (const r of [
      "POST /api/v1/traces",
      "GET /api/v1/traces/{traceId}",
      "POST /api/v1/forks/{forkId}/replay",
      "POST /api/v1/search",
      "POST /api/v1/evaluations/{evaluationId}/gate",
      "POST /api/v1/enforcement/check",
      "POST /v1/traces",
      "POST /api/v1/batch",
      "GET /api/v1/sessions/{sessionId}/graph",
      "DELETE /api/v1/api-keys/{keyId}",
      "GET /api/v1/insights",
      "GET /health"
    ]) {
      expect(listed.has(r)).toBe(true)
    }
    expect(ops.length).toBeGreaterThanOrEqual(45)
  })

  test("credentials: none or invalid is a 401 with the error body on every non-public route; public routes answer without", async () => {
    for (const op of ops) {
      const path = fillPath(op.path, {})
      const body = op.method === "GET" ? undefined : "{}"
      const headers = body === undefined ? {} : { "content-type": "application/json" }
      // The document's security requirement agrees with the list of public routes.
      expect(`${op.method} ${op.path} secured=${op.secured}`).toBe(
        `${op.method} ${op.path} secured=${!PUBLIC(op.path)}`
      )
      for (const [label, key, extra] of [
        ["none", null, {}],
        ["unknown key", "svc_not_a_real_key_000000", {}],
        ["bearer junk", null, { authorization: "Bearer eyJhbGciOiJub25lIn0.e30." }],
        ["empty bearer", null, { authorization: "Bearer " }]
      ] as const) {
        const r = await probe(`auth ${label} ${op.method} ${op.path}`, path, {
          method: op.method,
          body,
          headers: { ...headers, ...extra },
          key
        })
        if (PUBLIC(op.path)) expect(`${op.method} ${op.path} ${r.status}`).not.toBe(`${op.method} ${op.path} 401`)
        else {
          expect(`${label} ${op.method} ${op.path} ${r.status}`).toBe(`${label} ${op.method} ${op.path} 401`)
          expect((r.body as any).code).toBe("unauthorized")
        }
      }
      // Authentication comes first: junk ids, queries and bodies without credentials are still a 401.
      if (!PUBLIC(op.path)) {
        const junkPath = `${fillPath(op.path, Object.fromEntries(op.pathParams.map((p) => [p, "not-an-id"])))}?limit=-1&offset=NaN&x=1`
        const junk = await probe(`auth none junk ${op.method} ${op.path}`, junkPath, {
          method: op.method,
          key: null,
          ...(op.method === "GET" ? {} : { body: "{not json", headers: { "content-type": "application/json" } })
        })
        expect(`junk ${op.method} ${op.path} ${junk.status}`).toBe(`junk ${op.method} ${op.path} 401`)
      }
      const authed = await probe(`auth valid ${op.method} ${op.path}`, path, { method: op.method, body, headers })
      expect(`${op.method} ${op.path} ${authed.status}`).not.toBe(`${op.method} ${op.path} 401`)
    }
    for (const path of ["/openapi.json", "/docs"])
      expect((await probe(`public ${path}`, path, { method: "GET", key: null })).status).toBe(200)
    expect(report()).toEqual([])
  }, 120_000)

  test("bodies: random JSON, wrong types, extra properties, huge strings, deep nesting, empty, non-JSON, wrong content type", async () => {
    const cases: Array<{
      op: Operation
      label: string
      body: string | Uint8Array | undefined
      contentType: string | undefined
    }> = []
    let seed = SEED
    for (const op of ops.filter((o) => o.method !== "GET")) {
      const schema = op.body ? resolve(doc, op.body) : { type: "object", properties: {} }
      const validBody = valid(doc, schema)
      const props = Object.keys(schema.properties ?? {})
      const mutated = fc.oneof(
        fc.jsonValue({ maxDepth: 4 }).map((v) => ["random json", v] as const),
        validBody.map((v) => ["valid-looking", v] as const),
        fc
          .tuple(validBody, props.length > 0 ? fc.constantFrom(...props) : fc.constant("x"), wrongValue)
          .map(([v, p, w]) => [`wrong type .${p}`, { ...(v as object), [p]: w }] as const),
        fc
          .tuple(validBody, fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }))
          .map(([v, k, w]) => [`extra property ${k}`, { ...(v as object), [k]: w }] as const),
        fc
          .tuple(
            validBody,
            props.length > 0 ? fc.constantFrom(...props) : fc.constant("x"),
            fc.integer({ min: 10_000, max: 300_000 })
          )
          .map(([v, p, n]) => [`huge string .${p}`, { ...(v as object), [p]: "é".repeat(n) }] as const),
        fc
          .tuple(
            validBody,
            props.length > 0 ? fc.constantFrom(...props) : fc.constant("x"),
            fc.integer({ min: 1, max: 100 }),
            fc.boolean()
          )
          .map(([v, p, d, o]) => [`nested ${d} .${p}`, { ...(v as object), [p]: nested(d, "x", o) }] as const),
        fc
          .tuple(fc.integer({ min: 1, max: 100 }), fc.boolean())
          .map(([d, o]) => [`nested body ${d}`, nested(d, 1, o)] as const)
      )
      for (const [label, value] of fc.sample(mutated, { numRuns: RUNS * 2, seed: seed++ })) {
        cases.push({ op, label, body: json(value), contentType: "application/json" })
      }
      const raw = fc.oneof(
        fc.constantFrom<[string, string | undefined, string | undefined]>(
          ["empty body", "", "application/json"],
          ["no body", undefined, "application/json"],
          ["null", "null", "application/json"],
          ["non-JSON", "not json at all", "application/json"],
          ["truncated", '{"a": [1, 2', "application/json"],
          ["trailing junk", "{}}", "application/json"],
          ["BOM", "\ufeff{}", "application/json"],
          ["text/plain", "{}", "text/plain"],
          ["form", "a=1&b=2", "application/x-www-form-urlencoded"],
          ["multipart", "--x\r\n\r\n--x--", "multipart/form-data; boundary=x"],
          ["no content type", "{}", undefined],
          ["charset", "{}", "application/json; charset=latin1"],
          ["json with NUL", '{"name":"\\u0000"}', "application/json"],
          ["lone surrogate", '{"name":"\\ud800"}', "application/json"],
          ["huge number", '{"limit": 1e999999}', "application/json"],
          ["protobuf junk", "\u0000\u0001\u0002garbage", "application/x-protobuf"]
        ),
        fc
          .string({ maxLength: 40 })
          .map((s): [string, string | undefined, string | undefined] => [`random text`, s, "application/json"])
      )
      for (const [label, body, contentType] of fc.sample(raw, { numRuns: RUNS, seed: seed++ })) {
        cases.push({ op, label, body, contentType })
      }
    }
    const started = Date.now()
    await pool(cases, 3, async ({ op, label, body, contentType }) => {
      const path = fillPath(op.path, Object.fromEntries(op.pathParams.map((p) => [p, idFor(op, p)])))
      await probe(`${op.method} ${op.path} | body ${label}`, path, {
        method: op.method,
        body,
        headers: contentType === undefined ? {} : { "content-type": contentType }
      })
    })
    console.log(`fuzz bodies: ${cases.length} requests in ${Date.now() - started} ms (seed ${SEED})`)
    expect(report()).toEqual([])
  }, 180_000)

  test("query strings: declared and unknown keys, negative/huge/NaN numbers, repeated parameters", async () => {
    const cases: Array<{ op: Operation; query: string }> = []
    let seed = SEED + 1000
    for (const op of ops) {
      const keys = op.queryParams.map((q) => q.name)
      const key = fc.oneof(
        ...(keys.length > 0 ? [fc.constantFrom(...keys)] : []),
        fc.string({ minLength: 1, maxLength: 10 }),
        fc.constantFrom("token", "cursor", "__proto__", "constructor", "limit[]", "a.b")
      )
      const query = fc
        .array(fc.tuple(key, edgeScalar), { minLength: 1, maxLength: 5 })
        .chain((pairs) => fc.boolean().map((repeat) => (repeat ? [...pairs, ...pairs] : pairs)))
        .map((pairs) =>
          pairs.map(([k, v]) => `${encodeURIComponent(k)}=${/^%/.test(v) ? v : encodeURIComponent(v)}`).join("&")
        )
      for (const q of fc.sample(query, { numRuns: RUNS * 2, seed: seed++ })) cases.push({ op, query: q })
    }
    await pool(cases, 3, async ({ op, query }) => {
      const path = fillPath(op.path, Object.fromEntries(op.pathParams.map((p) => [p, idFor(op, p)])))
      const body = op.method === "GET" || op.method === "DELETE" ? undefined : "{}"
      await probe(`${op.method} ${op.path} | query ${query}`, `${path}?${query}`, {
        method: op.method,
        body,
        headers: body === undefined ? {} : { "content-type": "application/json" }
      })
    })
    expect(report()).toEqual([])
  }, 180_000)

  test("path ids: non-UUIDs, UUID-like, uppercase UUIDs, percent-encoded junk, very long", async () => {
    const cases: Array<{ op: Operation; values: Record<string, string> }> = []
    let seed = SEED + 2000
    for (const op of ops.filter((o) => o.pathParams.length > 0)) {
      const values = fc.record(Object.fromEntries(op.pathParams.map((p) => [p, edgePathId])))
      for (const v of fc.sample(values, { numRuns: RUNS * 2, seed: seed++ })) cases.push({ op, values: v })
      // The real id in upper case: ids are case-insensitive UUIDs, never a 5xx.
      cases.push({ op, values: Object.fromEntries(op.pathParams.map((p) => [p, idFor(op, p).toUpperCase()])) })
    }
    await pool(cases, 3, async ({ op, values }) => {
      const body = op.method === "GET" || op.method === "DELETE" ? undefined : "{}"
      const path = fillPath(op.path, values)
      await probe(`${op.method} ${op.path} | path ${path.slice(0, 120)}`, path, {
        method: op.method,
        body,
        headers: body === undefined ? {} : { "content-type": "application/json" }
      })
    })
    expect(report()).toEqual([])
  }, 180_000)
})

describe("fuzz: raw routes outside the OpenAPI document", () => {
  const rpc = (method: string, params: unknown, id: unknown = 1) => json({ jsonrpc: "2.0", id, method, params })
  const mcpHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }

  test("/mcp and /mcp/docs: junk JSON-RPC, random tool arguments, other methods; never a 5xx or an internal tool error", async () => {
    const tools = [
      "list_traces",
      "get_trace",
      "search_spans",
      "create_fork",
      "replay_fork",
      "run_evaluation",
      "gate",
      "check_enforcement",
      "list_holds",
      "approve_hold",
      "search_docs",
      "read_doc",
      "list_docs",
      "no_such_tool"
    ]
    const message = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }).map(json),
      fc.string({ maxLength: 40 }),
      fc
        .tuple(
          fc.constantFrom(...tools),
          fc.oneof(
            fc.jsonValue({ maxDepth: 2 }),
            fc.dictionary(
              fc.constantFrom(
                "trace_id",
                "fork_id",
                "evaluation_id",
                "trace_ids",
                "hold_id",
                "query",
                "limit",
                "offset",
                "id",
                "run_id",
                "tool_name",
                "filters",
                "max_spans",
                "payload_chars",
                "format",
                "status",
                "cursor",
                "env"
              ),
              fc.oneof(wrongValue, fc.constant(ids.traceId), fc.constant([ids.traceId]))
            )
          )
        )
        .map(([name, args]) => rpc("tools/call", { name, arguments: args })),
      fc
        .constantFrom("tools/list", "initialize", "ping", "resources/list", "prompts/get", "nope")
        .map((m) => rpc(m, {})),
      fc.tuple(fc.constantFrom("tools/list", "tools/call"), wrongValue, wrongValue).map(([m, p, id]) => rpc(m, p, id))
    )
    const samples = fc.sample(message, { numRuns: RUNS * 10, seed: SEED + 3000 })
    await pool(
      samples.flatMap((body) => ["/mcp", "/mcp/docs"].map((path) => ({ path, body }))),
      3,
      async ({ path, body }) => {
        const r = await probe(
          `POST ${path} | ${body.slice(0, 100)}`,
          path,
          { method: "POST", body, headers: mcpHeaders },
          { jsonRpc: true }
        )
        const text = json(r.body ?? "")
        if (text.includes('\\"code\\":\\"internal\\"') || text.includes('"code":"internal"')) {
          failures.push({
            label: `POST ${path} | internal tool error | ${body.slice(0, 100)}`,
            status: r.status,
            body: text.slice(0, 300)
          })
        }
      }
    )
    for (const method of ["GET", "PUT", "DELETE", "PATCH"]) {
      for (const path of ["/mcp", "/mcp/docs"]) await probe(`${method} ${path}`, path, { method, headers: mcpHeaders })
    }
    // /mcp is authenticated, /mcp/docs is not.
    const listTools = rpc("tools/list", {})
    expect(
      (await probe("POST /mcp no key", "/mcp", { method: "POST", body: listTools, headers: mcpHeaders, key: null }))
        .status
    ).toBe(401)
    expect(
      (
        await probe("POST /mcp/docs no key", "/mcp/docs", {
          method: "POST",
          body: listTools,
          headers: mcpHeaders,
          key: null
        })
      ).status
    ).toBe(200)
    expect(report()).toEqual([])
  }, 120_000)

  test("POST /v1/traces: junk OTLP JSON and protobuf, wrong encodings", async () => {
    const otlp = fc.oneof(
      fc.jsonValue({ maxDepth: 4 }).map((v) => ["json", json(v), "application/json"] as const),
      fc
        .array(
          fc.dictionary(
            fc.constantFrom("resource", "scopeSpans", "spans", "traceId", "spanId", "name", "attributes"),
            fc.oneof(wrongValue, fc.jsonValue({ maxDepth: 3 }))
          ),
          { maxLength: 3 }
        )
        .map((rs) => ["resourceSpans", json({ resourceSpans: rs }), "application/json"] as const),
      fc
        .array(
          fc.record({
            traceId: fc.oneof(fc.string(), fc.constant("4bf92f3577b34da6a3ce929d0e0e4736")),
            spanId: fc.oneof(fc.string(), fc.constant("00f067aa0ba902b7")),
            name: wrongValue,
            startTimeUnixNano: wrongValue,
            endTimeUnixNano: wrongValue,
            kind: wrongValue,
            attributes: fc.array(fc.record({ key: wrongValue, value: wrongValue }), { maxLength: 3 }),
            status: wrongValue
          }),
          { maxLength: 3 }
        )
        .map((spans) => ["spans", json({ resourceSpans: [{ scopeSpans: [{ spans }] }] }), "application/json"] as const),
      fc.uint8Array({ maxLength: 200 }).map((b) => ["protobuf", b, "application/x-protobuf"] as const),
      fc.uint8Array({ maxLength: 200 }).map((b) => ["protobuf", b, "application/protobuf"] as const),
      fc
        .constantFrom("text/plain", "application/xml", "", "application/json; charset=utf-16")
        .map((ct) => ["content type", "{}", ct] as const)
    )
    await pool(fc.sample(otlp, { numRuns: RUNS * 10, seed: SEED + 4000 }), 3, async ([label, body, contentType]) => {
      await probe(`POST /v1/traces | ${label}`, "/v1/traces", {
        method: "POST",
        body: body as string | Uint8Array,
        headers: contentType === "" ? {} : { "content-type": contentType }
      })
    })
    for (const encoding of ["gzip", "deflate", "br", "zstd", "junk"]) {
      await probe(`POST /v1/traces | content-encoding ${encoding}`, "/v1/traces", {
        method: "POST",
        body: '{"resourceSpans":[]}',
        headers: { "content-type": "application/json", "content-encoding": encoding }
      })
    }
    expect(report()).toEqual([])
  }, 120_000)

  test("/ws/v1/stream and /ws/v1/replay over plain HTTP (no upgrade): a 4xx with the error body, whatever the query", async () => {
    const query = fc
      .array(fc.tuple(fc.constantFrom("token", "last_event_id", "x", "filters"), edgeScalar), { maxLength: 3 })
      .map((pairs) => pairs.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&"))
    for (const q of fc.sample(query, { numRuns: RUNS * 2, seed: SEED + 5000 })) {
      for (const path of ["/ws/v1/stream", "/ws/v1/replay"]) {
        for (const key of [KEY_A, null, "svc_wrong"]) {
          const r = await probe(`GET ${path}?${q} key=${key === null ? "none" : key.slice(0, 8)}`, `${path}?${q}`, {
            method: "GET",
            key
          })
          if (r.status < 400 || (key === "svc_wrong" && r.status !== 401)) {
            failures.push({
              label: `GET ${path}?${q} with a bad header credential: expected 401`,
              status: r.status,
              body: json(r.body)
            })
          }
        }
      }
    }
    for (const path of ["/ws/v1/stream", "/ws/v1/replay"]) {
      for (const method of ["POST", "PUT", "DELETE"]) await probe(`${method} ${path}`, path, { method, body: "{}" })
      // An upgrade request missing the WebSocket handshake headers.
      for (const headers of [
        { upgrade: "websocket" },
        { upgrade: "websocket", "sec-websocket-version": "13" },
        { upgrade: "h2c" }
      ]) {
        const r = await probe(`GET ${path} handshake ${json(headers)}`, path, { method: "GET", headers })
        if (r.status < 400)
          failures.push({ label: `GET ${path} bad handshake ${json(headers)}`, status: r.status, body: json(r.body) })
      }
    }
    expect(report()).toEqual([])
  }, 60_000)

  test("unknown routes and methods: 404 with the error body", async () => {
    const paths = fc.oneof(
      fc.string({ maxLength: 30 }).map((s) => `/api/v1/${encodeURIComponent(s)}`),
      fc.constantFrom(
        "/api/v2/traces",
        "/api/v1/traces/",
        "/api/v1//traces",
        "/api/v1/traces/x/y/z",
        "/..%2f..%2fetc/passwd",
        "/%00",
        "/api/v1/traces;x",
        "/API/V1/TRACES",
        "/v1/traces/extra",
        "/.well-known/nope"
      )
    )
    for (const path of fc.sample(paths, { numRuns: RUNS * 5, seed: SEED + 6000 })) {
      for (const method of ["GET", "POST", "PUT"]) {
        await probe(`${method} ${path}`, path, {
          method,
          ...(method === "GET" ? {} : { body: "{}", headers: { "content-type": "application/json" } })
        })
      }
    }
    expect(report()).toEqual([])
    console.log(`fuzz: ${requests} requests in total (seed ${SEED}, FUZZ_RUNS=${RUNS})`)
  }, 60_000)
})
