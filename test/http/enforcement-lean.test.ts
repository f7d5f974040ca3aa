import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import * as jose from "jose"
import { TapedeckApi } from "#src/api/Api"
import { ENFORCEMENT_CHECK_PATH } from "#src/api/EnforcementApi"
import { Authentication, RateLimit } from "#src/api/Security"
import { checkBody } from "../support/CheckBodies.ts"
import { type ExportedSpan, startSpanReceiver } from "../support/SpanReceiver.ts"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"

// A request to exactly ENFORCEMENT_CHECK_PATH is answered by the lean route in front of the router
// (src/http/EnforcementCheckRoute.ts); the same path with a query string goes through the router to the HttpApi
// endpoint. Every answer must be the same.
const LEAN = ENFORCEMENT_CHECK_PATH
const API = `${ENFORCEMENT_CHECK_PATH}?via=api`

const SECRET = "test-secret-for-hs256-tokens-0123456789"
const MAX_BODY_BYTES = 2048

const sign = (claims: Record<string, unknown>, exp: string | number = "10m") =>
  new jose.SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setIssuedAt()
    .setExpirationTime(exp)
    .setIssuer("https://auth.example")
    .setAudience("tapedeck")
    .sign(new TextEncoder().encode(SECRET))

interface Answer {
  readonly status: number
  readonly contentType: string | null
  readonly retryAfter: string | null
  readonly body: unknown
}

const send = async (
  server: TestServer,
  path: string,
  headers: Readonly<Record<string, string>>,
  body: string | Uint8Array
): Promise<Answer> => {
  const response = await fetch(server.url + path, { method: "POST", headers, body })
  const text = await response.text()
  let parsed: unknown = text
  try {
    parsed = JSON.parse(text)
  } catch {}
  return {
    status: response.status,
    contentType: response.headers.get("content-type"),
    retryAfter: response.headers.get("retry-after"),
    body: parsed
  }
}

let server: TestServer
let revokedKey: string
let validJwt: string
let expiredJwt: string

beforeAll(async () => {
  server = await startTestServer({
    TAPEDECK_JWT_SECRET: SECRET,
    TAPEDECK_JWT_ISSUER: "https://auth.example",
    TAPEDECK_JWT_AUDIENCE: "tapedeck",
    TAPEDECK_MAX_BODY_BYTES: String(MAX_BODY_BYTES),
    TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000",
    // Verdicts must not depend on the machine's load: no fail-closed block at the deadline here.
    TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "20000"
  })
  // Policies whose verdicts depend on the check alone (no counters), so the two answers to one body are the same.
  for (const policy of [
    { type: "tool_denylist", params: { patterns: ["rm_*", "a*"] } },
    { type: "max_steps", params: { max_steps: 1000 } },
    { type: "model_allowlist", params: { patterns: ["gpt-*", "claude-*"] } }
  ]) {
    expect((await server.post("/api/v1/guardrails", policy)).status).toBe(200)
  }
  const created = (await (await server.post("/api/v1/api-keys", { name: "revoked" })).json()) as any
  revokedKey = created.key
  // Used once (so this instance has verified it recently), then revoked.
  expect((await send(server, LEAN, { "x-service-key": revokedKey }, '{"run_id":"r"}')).status).toBe(200)
  expect((await server.request("DELETE", `/api/v1/api-keys/${created.id}`)).status).toBe(200)
  validJwt = await sign({ sub: "user-1", account: "acme" })
  expiredJwt = await sign({ sub: "user-1", account: "acme" }, Math.floor(Date.now() / 1000) - 60)
}, 60_000)
afterAll(() => server.stop(), 60_000)

const credentialHeaders = (): fc.Arbitrary<Record<string, string>> =>
  fc.oneof(
    {
      weight: 2,
      arbitrary: fc.constantFrom<Record<string, string>>(
        { "x-service-key": KEY_A },
        { "x-service-key": KEY_B },
        { authorization: `Bearer ${KEY_A}` },
        { authorization: `bearer ${KEY_B}` },
        { authorization: `Bearer ${validJwt}` }
      )
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom<Record<string, string>>(
        { authorization: `Token ${KEY_A}` },
        { authorization: `Basic ${btoa(`pk:${KEY_A}`)}` },
        { "x-service-key": "", authorization: `Bearer ${KEY_A}` },
        { "x-service-key": "svc_wrong", authorization: `Bearer ${KEY_B}` },
        { "x-service-key": "svc_wrong" },
        { "x-service-key": "svc_not_a_key_at_all" },
        {},
        { "x-service-key": revokedKey },
        { authorization: `Bearer ${revokedKey}` },
        { authorization: `Bearer ${expiredJwt}` },
        { authorization: "Bearer eyJhbGciOiJub25lIn0.e30." }
      )
    }
  )

/** No content type at all (a byte body), or one of those the API reads, refuses or reads as something else. */
const contentTypes = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.constantFrom<string | undefined>(
      undefined,
      "application/json",
      "application/json; charset=utf-8",
      "APPLICATION/JSON",
      " application/json "
    )
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom<string | undefined>(
      "application/json-patch+json",
      "text/plain",
      "text/plain; x=application/json",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/octet-stream"
    )
  }
)

/** A body's text: a check body as JSON, something that is not JSON, too deep, or too large. */
const bodyTexts = fc.oneof(
  { weight: 6, arbitrary: checkBody.map((b) => JSON.stringify(b) ?? "") },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "",
      "{",
      "null",
      "[1, 2]",
      '{"run_id": "r",}',
      '{"run_id": "r", "run_id": "s"}',
      `{"run_id": "r", "tool_name": ${"[".repeat(200)}${"]".repeat(200)}}`,
      `{"run_id": "${"x".repeat(MAX_BODY_BYTES)}"}`,
      '{"run_id": "r", "tool_name": "rm_rf"}',
      '{"run_id": "r", "model": "llama"}',
      '{"run_id": "r", "step_index": 1000}',
      "run_id=r"
    )
  }
)

const sendBoth = async (headers: Record<string, string>, text: string, asBytes: boolean) => {
  const body = asBytes ? new TextEncoder().encode(text) : text
  return [await send(server, LEAN, headers, body), await send(server, API, headers, body)] as const
}

describe("the check's lean route answers as the HttpApi endpoint", () => {
  test("any headers and body: the same status, body, content type and Retry-After", async () => {
    let lean200 = 0
    await fc.assert(
      fc.asyncProperty(credentialHeaders(), contentTypes, bodyTexts, async (credentials, contentType, text) => {
        const headers = { ...credentials, ...(contentType === undefined ? {} : { "content-type": contentType }) }
        // Without a content type the body goes as bytes, for which fetch sets none.
        const [lean, api] = await sendBoth(headers, text, contentType === undefined)
        expect({ headers, text, answer: lean }).toEqual({ headers, text, answer: api })
        if (lean.status === 200) lean200++
      }),
      { numRuns: 300 }
    )
    // The property saw checks decided, not only refusals.
    expect(lean200).toBeGreaterThan(30)
  }, 120_000)

  test("valid checks: allow and block as the policies say; bodies at the edges of the rules", async () => {
    for (const body of [
      { run_id: "" },
      { run_id: "x".repeat(201) },
      { run_id: "r", extra: 1 },
      { run_id: "r", project_id: "nope" },
      { run_id: "r", trace_id: "7F9C2BA4-E88F-4D6A-9C41-3F1D6A2B8E10" },
      { run_id: "r", proposed_usd: 1e12 + 1 },
      { run_id: "r", proposed_tokens: 1.5 },
      { run_id: "r", step_index: -1 },
      { run_id: "r", model: "a\u0000" },
      { run_id: 7 },
      {},
      { run_id: "r1", tool_name: "search", model: "gpt-4o" },
      { run_id: "r1", tool_name: "rm_rf" },
      { run_id: "r1", model: "llama-3" },
      { run_id: "r1", step_index: 1000 }
    ]) {
      const [lean, api] = await sendBoth(
        { "x-service-key": KEY_A, "content-type": "application/json" },
        JSON.stringify(body),
        false
      )
      expect({ body, answer: lean }).toEqual({ body, answer: api })
    }
  })
})

describe("the endpoint's steps", () => {
  test("are the ones the lean route takes: Authentication, then RateLimit, nothing else declared", () => {
    // A middleware added to the check's endpoint, its group or the API would be skipped by the lean route
    // (EnforcementCheckRoute takes each step by hand): it must be added there too, and this list with it.
    const group = TapedeckApi.groups.enforcement!
    const check = group.endpoints.check!
    expect([check.method, check.path]).toEqual(["POST", ENFORCEMENT_CHECK_PATH])
    const keys = (middlewares: ReadonlySet<{ readonly key: string }>) => [...middlewares].map((m) => m.key)
    expect(keys(TapedeckApi.middlewares)).toEqual([])
    expect(keys(check.middlewares)).toEqual([])
    // Declared in this order, RateLimit runs inside Authentication.
    expect(keys(group.middlewares)).toEqual([RateLimit.key, Authentication.key])
  })
})

describe("batch operations", () => {
  test("a check in a batch reaches the API's endpoint and is answered as the lean route answers", async () => {
    const bodies = [
      { run_id: "b1", tool_name: "search", model: "gpt-4o" },
      { run_id: "b1", tool_name: "rm_rf" },
      { run_id: "" },
      { run_id: "b1", extra: true }
    ]
    const response = await server.post("/api/v1/batch", {
      operations: bodies.map((body) => ({ method: "POST", path: ENFORCEMENT_CHECK_PATH, body }))
    })
    expect(response.status).toBe(200)
    const results = ((await response.json()) as any).results as Array<{ status: number; body: unknown }>
    const direct = await Promise.all(
      bodies.map((body) =>
        send(server, LEAN, { "x-service-key": KEY_A, "content-type": "application/json" }, JSON.stringify(body))
      )
    )
    expect(results.map((r) => [r.status, r.body])).toEqual(direct.map((a) => [a.status, a.body]))
    expect(results.map((r) => r.status)).toEqual([200, 200, 400, 400])
  })
})

describe("rate limits", () => {
  test("one window for both: the same 429 with Retry-After once the limit is spent", async () => {
    const limited = await startTestServer({ TAPEDECK_RATE_LIMIT_PER_MINUTE: "4" })
    try {
      const headers = { "x-service-key": KEY_A, "content-type": "application/json" }
      const body = '{"run_id": "r"}'
      for (let i = 0; i < 2; i++) {
        expect((await send(limited, LEAN, headers, body)).status).toBe(200)
        expect((await send(limited, API, headers, body)).status).toBe(200)
      }
      const lean = await send(limited, LEAN, headers, body)
      const api = await send(limited, API, headers, body)
      expect(lean.status).toBe(429)
      expect(Number(lean.retryAfter)).toBeGreaterThanOrEqual(1)
      // The seconds left may tick between the two requests.
      const seconds = /\d+/g
      expect({ ...lean, retryAfter: null, body: JSON.stringify(lean.body).replace(seconds, "N") }).toEqual({
        ...api,
        retryAfter: null,
        body: JSON.stringify(api.body).replace(seconds, "N")
      })
      expect(Math.abs(Number(lean.retryAfter) - Number(api.retryAfter))).toBeLessThanOrEqual(1)
      // Another credential has its own window.
      expect((await send(limited, LEAN, { ...headers, "x-service-key": KEY_B }, body)).status).toBe(200)
    } finally {
      await limited.stop()
    }
  }, 60_000)
})

describe.if(Boolean(process.env.TEST_DATABASE_URL))("the database going away", () => {
  test("both fail closed: 200 block, no policy, policy state unavailable", async () => {
    const { startTcpProxy } = await import("../support/TcpProxy.ts")
    const first = await startTestServer()
    const url = new URL(first.env.DATABASE_URL!)
    const proxy = await startTcpProxy({ hostname: url.hostname, port: Number(url.port || 5432) })
    url.port = String(proxy.port)
    const cut = await startTestServer({
      DATABASE_URL: url.toString(),
      TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "300",
      TAPEDECK_JWT_SECRET: SECRET,
      TAPEDECK_JWT_ISSUER: "https://auth.example",
      TAPEDECK_JWT_AUDIENCE: "tapedeck"
    })
    try {
      // An API key and a JWT, each used once before the cut (this instance has seen them), and an unknown key.
      const credentials = [{ "x-service-key": KEY_A }, { authorization: `Bearer ${validJwt}` }]
      const body = JSON.stringify({ run_id: crypto.randomUUID(), tool_name: "search" })
      for (const c of credentials) {
        expect((await send(cut, LEAN, { ...c, "content-type": "application/json" }, body)).status).toBe(200)
      }
      proxy.cut()
      for (const c of credentials) {
        const headers = { ...c, "content-type": "application/json" }
        const lean = await send(cut, LEAN, headers, body)
        const api = await send(cut, API, headers, body)
        for (const answer of [lean, api]) {
          expect(answer.status).toBe(200)
          expect(answer.body).toMatchObject({ verdict: "block", policy_id: null, policy_type: null })
          expect((answer.body as any).reason).toStartWith("policy state unavailable")
        }
        expect({ ...lean, body: null }).toEqual({ ...api, body: null })
      }
      // A key this instance has not seen cannot be looked up: the same refusal from both.
      const unseen = { "x-service-key": KEY_B, "content-type": "application/json" }
      const lean = await send(cut, LEAN, unseen, body)
      expect(lean.status).toBeGreaterThanOrEqual(400)
      expect(lean).toEqual(await send(cut, API, unseen, body))
      proxy.restore()
    } finally {
      await cut.stop()
      await first.stop()
      proxy.stop()
    }
  }, 60_000)
})

/** A server that traces itself to a receiver on loopback (as test/http/self-tracing.test.ts), and its spans. */
const withTracedServer = async (use: (traced: TestServer, spans: Array<ExportedSpan>) => Promise<void>) => {
  const receiver = startSpanReceiver()
  const traced = await startTestServer({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint })
  try {
    await use(traced, receiver.spans)
  } finally {
    await traced.stop()
    receiver.stop()
  }
}

/** The server span of the request to `path` (its URL ends with it), once exported. */
const serverSpan = async (spans: ReadonlyArray<ExportedSpan>, path: string) => {
  const find = () =>
    spans.find(
      (s) =>
        s.name === "http.server POST" &&
        s.attributes.some((a) => a.key === "url.full" && a.value.stringValue?.endsWith(path))
    )
  const deadline = Date.now() + 20_000
  while (find() === undefined && Date.now() < deadline) await Bun.sleep(200)
  return find()
}

/** The span's attributes but those that differ from request to request (the query string, the headers). */
const comparable = (span: ExportedSpan | undefined) =>
  Object.fromEntries(
    (span?.attributes ?? [])
      .filter(
        (a) =>
          !["url.full", "url.query", "http.response.header.date", "http.response.header.content-length"].includes(
            a.key
          ) &&
          !a.key.startsWith("http.request.header.") &&
          !a.key.startsWith("client.")
      )
      .map((a) => [a.key, a.value])
  )

describe("self-tracing", () => {
  test(
    "the lean route's server span has the API's attributes (http.route included)",
    () =>
      withTracedServer(async (traced, spans) => {
        const headers = { "x-service-key": KEY_A, "content-type": "application/json" }
        for (const path of [LEAN, API]) expect((await send(traced, path, headers, '{"run_id": "r"}')).status).toBe(200)
        const lean = comparable(await serverSpan(spans, LEAN))
        expect(lean).toEqual(comparable(await serverSpan(spans, API)))
        expect(lean["http.route"]).toEqual({ stringValue: ENFORCEMENT_CHECK_PATH })
      }),
    60_000
  )

  test(
    "a client gone before its body arrived: interrupted (499) on both, not answered",
    () =>
      withTracedServer(async (traced, spans) => {
        const { port } = new URL(traced.url)
        for (const path of [LEAN, `${API}&abort`]) {
          const socket = await Bun.connect({ hostname: "127.0.0.1", port: Number(port), socket: { data() {} } })
          socket.write(
            `POST ${path} HTTP/1.1\r\nhost: x\r\nx-service-key: ${KEY_A}\r\ncontent-type: application/json\r\n` +
              'content-length: 20\r\n\r\n{"run_id"'
          )
          await Bun.sleep(200)
          socket.terminate()
        }
        const lean = comparable(await serverSpan(spans, LEAN))
        expect(lean["http.response.status_code"]).toEqual({ intValue: 499 })
        expect(lean).toEqual(comparable(await serverSpan(spans, `${API}&abort`)))
      }),
    60_000
  )
})
