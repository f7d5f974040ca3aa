import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import * as jose from "jose"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { generateKey } from "#layers/auth/KeyMaterial"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { trace } from "../support/Fixtures.ts"

const SECRET = "test-secret-for-hs256-tokens-0123456789"
let server: TestServer
beforeAll(async () => {
  server = await startTestServer({
    TAPEDECK_JWT_SECRET: SECRET,
    TAPEDECK_JWT_ISSUER: "https://auth.example",
    TAPEDECK_JWT_AUDIENCE: "tapedeck"
  })
})
afterAll(() => server.stop())

const sign = (
  claims: Record<string, unknown>,
  options: { exp?: number | string; secret?: string; iss?: string; aud?: string } = {}
) => {
  let jwt = new jose.SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setIssuedAt()
  jwt = jwt
    .setExpirationTime(options.exp ?? "10m")
    .setIssuer(options.iss ?? "https://auth.example")
    .setAudience(options.aud ?? "tapedeck")
  return jwt.sign(new TextEncoder().encode(options.secret ?? SECRET))
}

const withBearer = (token: string) =>
  fetch(`${server.url}/api/v1/traces`, { headers: { authorization: `Bearer ${token}` } })

const expect401 = async (response: Response) => {
  expect(response.status).toBe(401)
  const body = (await response.json()) as any
  expect(body.code).toBe("unauthorized")
  expect(body.retryable).toBe(false)
  expect(typeof body.error).toBe("string")
}

describe("API keys", () => {
  test("x-service-key and Authorization: Bearer both authenticate an API key", async () => {
    expect((await fetch(`${server.url}/api/v1/traces`, { headers: { "x-service-key": KEY_A } })).status).toBe(200)
    expect((await withBearer(KEY_A)).status).toBe(200)
  })

  test("missing, unknown and malformed credentials are 401 with the error body", async () => {
    await expect401(await fetch(`${server.url}/api/v1/traces`))
    await expect401(await fetch(`${server.url}/api/v1/traces`, { headers: { "x-service-key": "svc_unknown_key" } }))
    await expect401(await fetch(`${server.url}/api/v1/traces`, { headers: { "x-service-key": "not-a-key" } }))
    await expect401(await fetch(`${server.url}/api/v1/traces`, { headers: { authorization: "Basic Zm9vOmJhcg==" } }))
    await expect401(await withBearer("svc_" + "x".repeat(10_000)))
    // The scheme name must really be Bearer: the platform alone would accept any seven characters.
    for (const authorization of [`Basic  ${KEY_A}`, `XXXXXXX${KEY_A}`]) {
      await expect401(await fetch(`${server.url}/api/v1/traces`, { headers: { authorization } }))
    }
  })

  test("keys are stored hashed, never in clear", async () => {
    const rows = await server.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ prefix: string; key_hash: string }>`SELECT prefix, key_hash FROM api_keys`
      }).pipe(Effect.orDie)
    )
    expect(rows.length).toBeGreaterThanOrEqual(2)
    for (const row of rows) {
      expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/)
      expect(row.prefix.length).toBeLessThan(KEY_A.length)
      expect(row.key_hash).not.toContain("svc_")
    }
  })

  test("a revoked key is refused on its next request", async () => {
    const key = await server.run(
      Effect.gen(function* () {
        const accountId = yield* (yield* AccountRepo).ensure("acme")
        const fresh = yield* generateKey
        yield* (yield* ApiKeyRepo).insert(accountId, fresh, "revocation test")
        return fresh
      }).pipe(Effect.provide([AccountRepo.Default, ApiKeyRepo.Default]))
    )
    expect((await withBearer(key)).status).toBe(200)
    const prefix = key.slice(0, 12)
    const revoked = await server.run(
      Effect.gen(function* () {
        return yield* (yield* ApiKeyRepo).revokeByPrefix(prefix)
      }).pipe(Effect.provide(ApiKeyRepo.Default))
    )
    expect(revoked).toBe(1)
    await expect401(await withBearer(key))
  })
})

describe("web-session JWTs (HS256)", () => {
  test("a valid token acts for its account", async () => {
    const t = trace()
    expect((await server.post("/api/v1/traces", t, KEY_A)).status).toBe(200)
    const token = await sign({ sub: "user-1", account: "acme" })
    const response = await fetch(`${server.url}/api/v1/traces/${t.id}`, {
      headers: { authorization: `Bearer ${token}` }
    })
    expect(response.status).toBe(200)
    const other = await sign({ sub: "user-2", account: "globex" })
    expect(
      (await fetch(`${server.url}/api/v1/traces/${t.id}`, { headers: { authorization: `Bearer ${other}` } })).status
    ).toBe(404)
  })

  test("expired, wrongly signed, wrong issuer or audience, missing claims and unknown accounts are 401", async () => {
    await expect401(
      await withBearer(await sign({ sub: "u", account: "acme" }, { exp: Math.floor(Date.now() / 1000) - 5 }))
    )
    await expect401(
      await withBearer(await sign({ sub: "u", account: "acme" }, { secret: "another-secret-another-secret-00" }))
    )
    await expect401(await withBearer(await sign({ sub: "u", account: "acme" }, { iss: "https://evil.example" })))
    await expect401(await withBearer(await sign({ sub: "u", account: "acme" }, { aud: "someone-else" })))
    await expect401(await withBearer(await sign({ account: "acme" })))
    await expect401(await withBearer(await sign({ sub: "u" })))
    await expect401(await withBearer(await sign({ sub: "u", account: "no-such-account" })))
    await expect401(await withBearer(await sign({ sub: "u", account: "acme\u0000" })))
    const noExp = await new jose.SignJWT({ sub: "u", account: "acme" })
      .setProtectedHeader({ alg: "HS256" })
      .setIssuer("https://auth.example")
      .setAudience("tapedeck")
      .sign(new TextEncoder().encode(SECRET))
    await expect401(await withBearer(noExp))
  })

  test("an empty or blank sub is refused like a missing one", async () => {
    for (const sub of ["", " ", "\t\n", "\u00a0"]) {
      await expect401(await withBearer(await sign({ sub, account: "acme" })))
    }
    expect((await withBearer(await sign({ sub: "u", account: "acme" }))).status).toBe(200)
  })

  test("alg none and a non-HS256 algorithm are refused", async () => {
    const unsigned = new jose.UnsecuredJWT({ sub: "u", account: "acme" })
      .setIssuer("https://auth.example")
      .setAudience("tapedeck")
      .setExpirationTime("10m")
      .encode()
    await expect401(await withBearer(unsigned))
    const hs512 = await new jose.SignJWT({ sub: "u", account: "acme" })
      .setProtectedHeader({ alg: "HS512" })
      .setIssuer("https://auth.example")
      .setAudience("tapedeck")
      .setExpirationTime("10m")
      .sign(new TextEncoder().encode(SECRET + SECRET))
    await expect401(await withBearer(hs512))
  })
})

// The database behind a loopback proxy that the test cuts: PostgreSQL only (embedded PGlite has no connection to cut).
describe.if(Boolean(process.env.TEST_DATABASE_URL))("during a database outage", () => {
  test("an enforcement check authenticated by a JWT fails closed (block) like one by an API key", async () => {
    const { startTcpProxy } = await import("../support/TcpProxy.ts")
    const url = new URL(server.env.DATABASE_URL!)
    const proxy = await startTcpProxy({ hostname: url.hostname, port: Number(url.port || 5432) })
    url.port = String(proxy.port)
    const b = await startTestServer({
      DATABASE_URL: url.toString(),
      TAPEDECK_API_KEYS: "",
      TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "300",
      TAPEDECK_DB_CONNECT_TIMEOUT_MS: "1000",
      TAPEDECK_JWT_SECRET: SECRET,
      TAPEDECK_JWT_ISSUER: "https://auth.example",
      TAPEDECK_JWT_AUDIENCE: "tapedeck"
    })
    try {
      const token = await sign({ sub: "user-1", account: "acme" })
      const check = (headers: Record<string, string>) =>
        fetch(`${b.url}/api/v1/enforcement/check`, {
          method: "POST",
          headers: { ...headers, "content-type": "application/json" },
          body: JSON.stringify({ run_id: crypto.randomUUID() })
        })
      // The key has been used on this instance before the outage; no JWT has: the account is known to the instance
      // from its start, and a token is verified by its signature alone.
      const before = await check({ "x-service-key": KEY_A })
      expect(before.status).toBe(200)
      expect(((await before.json()) as any).verdict).toBe("allow")
      proxy.cut()
      const otherUser = await sign({ sub: "user-2", account: "acme" })
      for (const headers of [
        { authorization: `Bearer ${token}` },
        { authorization: `Bearer ${otherUser}` },
        { "x-service-key": KEY_A }
      ]) {
        const during = await check(headers)
        expect({ headers: Object.keys(headers)[0], status: during.status }).toEqual({
          headers: Object.keys(headers)[0],
          status: 200
        })
        expect(((await during.json()) as any).verdict).toBe("block")
      }
      // A bad signature is still a 401, outage or not, and so is an account this instance has never known.
      expect(
        (await check({ authorization: `Bearer ${await sign({ sub: "u", account: "initech" })}` })).status
      ).not.toBe(200)
      expect(
        (
          await check({
            authorization: `Bearer ${await sign({ sub: "u", account: "acme" }, { secret: "another-secret-another-secret-00" })}`
          })
        ).status
      ).toBe(401)
      proxy.restore()
    } finally {
      await b.stop()
      proxy.stop()
    }
  }, 60_000)
})

describe("TAPEDECK_API_KEYS", () => {
  test("a malformed list, a key without svc_, or one key for two accounts stops the start", async () => {
    for (const keys of [
      "acme",
      "acme=key_without_prefix",
      "=svc_abcdefgh",
      "acme=svc_same_key_1,globex=svc_same_key_1"
    ]) {
      const failed = await startTestServer({ TAPEDECK_API_KEYS: keys }).then(
        async (s) => {
          await s.stop()
          return false
        },
        () => true
      )
      expect(failed).toBe(true)
    }
  }, 60_000)
})
