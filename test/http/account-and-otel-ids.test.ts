import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as jose from "jose"
import { TapedeckApi } from "#src/api/Api"
import { AccountInfo } from "#src/domain/Account"
import { type OtelTraceId, TraceDetail, TraceList } from "#src/domain/Trace"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"

const SECRET = "test-secret-for-hs256-tokens-0123456789"
let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_JWT_SECRET: SECRET })
})
afterAll(() => server.stop())

const sign = (claims: Record<string, unknown>) =>
  new jose.SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setIssuedAt()
    .setExpirationTime("10m")
    .sign(new TextEncoder().encode(SECRET))

const expectError = async (response: Response, status: number, code: string) => {
  expect(response.status).toBe(status)
  expect(await response.json()).toEqual({ error: expect.any(String), code, retryable: false })
}

const json = async (response: Response): Promise<any> => {
  expect(response.status).toBe(200)
  return response.json()
}

describe("GET /api/v1/account", () => {
  test("names the account of an API key, by either header, and of a JWT", async () => {
    const a = Schema.decodeUnknownSync(AccountInfo)(await json(await server.get("/api/v1/account", KEY_A)))
    expect(a.name).toBe("acme")
    const b = await json(await server.get("/api/v1/account", KEY_B))
    expect(b.name).toBe("globex")
    expect(b.id).not.toBe(a.id)
    const bearer = await json(
      await server.request("GET", "/api/v1/account", { key: null, headers: { authorization: `Bearer ${KEY_A}` } })
    )
    expect(bearer).toEqual({ id: a.id, name: "acme" })
    const token = await sign({ sub: "user-1", account: "globex" })
    const viaJwt = await json(
      await server.request("GET", "/api/v1/account", { key: null, headers: { authorization: `Bearer ${token}` } })
    )
    expect(viaJwt).toEqual(b)
  })

  test("without valid credentials it is a 401", async () => {
    await expectError(await server.get("/api/v1/account", null), 401, "unauthorized")
    await expectError(await server.get("/api/v1/account", "svc_not_a_key_at_all_00000"), 401, "unauthorized")
  })
})

/** Sends one OTLP trace with the key; its OTel trace id. */
const sendOtlp = async (traceHex: string, key: string, name: string) => {
  const root = otlpSpan({ traceId: traceHex, name, startMs: 0, endMs: 50 })
  expect((await server.post("/v1/traces", exportBody([root]), key)).status).toBe(200)
}

describe("GET /api/v1/traces/{OpenTelemetry trace id}", () => {
  test("finds the account's trace by its 32-hex OTel id, in any case, and the detail shows that id", async () => {
    const traceHex = hex(16)
    await sendOtlp(traceHex, KEY_A, "a's run")
    const listed = Schema.decodeUnknownSync(TraceList)(await json(await server.get("/api/v1/traces?limit=100", KEY_A)))
    const item = listed.items.find((t) => t.otelTraceId === traceHex)
    expect(item).toBeDefined()
    for (const form of [traceHex, traceHex.toUpperCase()]) {
      const detail = Schema.decodeUnknownSync(TraceDetail)(
        await json(await server.get(`/api/v1/traces/${form}`, KEY_A))
      )
      expect(detail.id).toBe(item!.id)
      expect(detail.otelTraceId).toBe(traceHex)
    }
    // The UUID still works, and shows the OTel id too.
    expect((await json(await server.get(`/api/v1/traces/${item!.id}`, KEY_A))).otelTraceId).toBe(traceHex)
  })

  test("a REST trace whose metadata names something else under otel.trace_id shows no otelTraceId", async () => {
    for (const value of ["not-an-id", 42, { nested: true }]) {
      const id = crypto.randomUUID()
      expect(
        (
          await server.post(
            "/api/v1/traces",
            { id, started_at: "2026-01-01T00:00:00Z", metadata: { otel: { trace_id: value } } },
            KEY_A
          )
        ).status
      ).toBe(200)
      const detail = await json(await server.get(`/api/v1/traces/${id}`, KEY_A))
      expect(detail.metadata.otel.trace_id).toEqual(value)
      expect(detail.otelTraceId).toBeUndefined()
    }
  })

  test("the same OTel id sent by two accounts names each account's own trace; one only another account has is a 404", async () => {
    const shared = hex(16)
    await sendOtlp(shared, KEY_A, "a's copy")
    await sendOtlp(shared, KEY_B, "b's copy")
    const a = await json(await server.get(`/api/v1/traces/${shared}`, KEY_A))
    const b = await json(await server.get(`/api/v1/traces/${shared}`, KEY_B))
    expect(a.id).not.toBe(b.id)
    expect([a.name, b.name]).toEqual(["a's copy", "b's copy"])
    const onlyA = hex(16)
    await sendOtlp(onlyA, KEY_A, "a only")
    await expectError(await server.get(`/api/v1/traces/${onlyA}`, KEY_B), 404, "not_found")
    // B cannot reach A's trace by its UUID either.
    const aOnly = await json(await server.get(`/api/v1/traces/${onlyA}`, KEY_A))
    await expectError(await server.get(`/api/v1/traces/${aOnly.id}`, KEY_B), 404, "not_found")
  })

  test("an unknown OTel id is a 404, a deleted trace's too, and what is neither a UUID nor 32 hex digits is a 400", async () => {
    await expectError(await server.get(`/api/v1/traces/${hex(16)}`, KEY_A), 404, "not_found")
    const gone = hex(16)
    await sendOtlp(gone, KEY_A, "to delete")
    const id = (await json(await server.get(`/api/v1/traces/${gone}`, KEY_A))).id
    expect((await server.request("DELETE", `/api/v1/traces/${id}`, { key: KEY_A })).status).toBe(200)
    await expectError(await server.get(`/api/v1/traces/${gone}`, KEY_A), 404, "not_found")
    for (const bad of [hex(15) + "a", hex(16) + "0", "g".repeat(32), `${hex(8)}-${hex(8)}`]) {
      await expectError(await server.get(`/api/v1/traces/${bad}`, KEY_A), 400, "validation_failed")
    }
  })
})

describe("through HttpApiClient (what Studio uses)", () => {
  test("the derived client lists with filters, reads a trace by its OTel id and the account; a value the schema refuses fails before it is sent", async () => {
    const traceHex = hex(16)
    await sendOtlp(traceHex, KEY_A, "client-visible run")
    const result = await Effect.gen(function* () {
      const client = yield* HttpApiClient.make(TapedeckApi, {
        baseUrl: server.url,
        transformClient: HttpClient.mapRequest(HttpClientRequest.setHeader("x-service-key", KEY_A))
      })
      const account = yield* client.account.get()
      const page = yield* client.traces.list({
        urlParams: { name: "CLIENT-VISIBLE", has_error: false, limit: 1, offset: 0, total: "capped" }
      })
      const detail = yield* client.traces.get({ path: { traceId: traceHex as OtelTraceId } })
      const bad = yield* Effect.flip(
        client.traces.list({ urlParams: { status: "done" as never, limit: 1, offset: 0, total: "exact" } })
      )
      return { account, page, detail, bad }
    }).pipe(Effect.provide(FetchHttpClient.layer), Effect.runPromise)
    expect(result.account.name).toBe("acme")
    expect(result.page.items.map((t) => t.otelTraceId)).toEqual([traceHex])
    expect(result.page.total).toBe(1)
    expect(result.detail.name).toBe("client-visible run")
    expect(result.detail.otelTraceId).toBe(traceHex)
    // The client encodes what its schema allows only, so a bad status fails before it is sent, as a ParseError.
    expect(result.bad._tag).toBe("ParseError")
  })
})
