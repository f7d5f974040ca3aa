import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Schema } from "effect"
import * as jose from "jose"
import { AccountInfo } from "#src/domain/Account"
import { TraceDetail, TraceList } from "#src/domain/Trace"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { exportBody, hex, otlpSpan } from "../support/Otlp.ts"

const SECRET = "test-secret-for-hs256-tokens-0123456789"
let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_JWT_SECRET: SECRET })
})
afterAll(() => server.stop())

const sign = (claims: Record<string, unknown>) =>
  new jose.SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setIssuedAt().setExpirationTime("10m")
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
    const bearer = await json(await server.request("GET", "/api/v1/account", { key: null, headers: { authorization: `Bearer ${KEY_A}` } }))
    expect(bearer).toEqual({ id: a.id, name: "acme" })
    const token = await sign({ sub: "user-1", account: "globex" })
    const viaJwt = await json(await server.request("GET", "/api/v1/account", { key: null, headers: { authorization: `Bearer ${token}` } }))
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
      const detail = Schema.decodeUnknownSync(TraceDetail)(await json(await server.get(`/api/v1/traces/${form}`, KEY_A)))
      expect(detail.id).toBe(item!.id)
      expect(detail.otelTraceId).toBe(traceHex)
    }
    // The UUID still works, and shows the OTel id too.
    expect((await json(await server.get(`/api/v1/traces/${item!.id}`, KEY_A))).otelTraceId).toBe(traceHex)
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
