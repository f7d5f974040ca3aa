import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { authentication } from "tapedeck"
import { startServer, type TestServer } from "tapedeck/testing"
import { signedTokensLive, signToken } from "./SignedTokens.ts"

const SECRET = "team-signing-secret"
let server: TestServer
beforeAll(async () => {
  server = await startServer({ extensions: [signedTokensLive(SECRET)] })
})
afterAll(() => server?.stop())

const trace = () => {
  const at = new Date().toISOString()
  return { id: crypto.randomUUID(), name: "t", started_at: at, status: "completed", spans: [] }
}
const bearer = (token: string) => ({ key: null, headers: { authorization: `Bearer ${token}` } })

describe(`custom authentication composed into a real server (${process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"})`, () => {
  test("the team's tokens replace API keys, in both headers, scoped to their account", async () => {
    const acme = signToken(SECRET, "acme", "alice")
    const t = trace()
    expect((await server.request("POST", "/api/v1/traces", { ...bearer(acme), body: t })).status).toBe(200)
    expect((await server.request("GET", `/api/v1/traces/${t.id}`, bearer(acme))).status).toBe(200)
    expect((await server.request("GET", `/api/v1/traces/${t.id}`, { key: acme })).status).toBe(200)
    // Another account's token: 404, as for any other account's data.
    expect(
      (await server.request("GET", `/api/v1/traces/${t.id}`, bearer(signToken(SECRET, "globex", "bob")))).status
    ).toBe(404)
    // The server's API keys no longer authenticate.
    const byKey = await server.request("GET", `/api/v1/traces/${t.id}`, { key: server.keys.acme })
    expect(byKey.status).toBe(401)
    expect(((await byKey.json()) as { code: string }).code).toBe("unauthorized")
    expect((await server.request("GET", `/api/v1/traces/${t.id}`, bearer(server.keys.acme))).status).toBe(401)
  })

  test("a forged, malformed or unknown-account token is 401, and so is none", async () => {
    const forged = signToken("another-secret", "acme", "mallory")
    for (const token of [forged, "sso.acme.alice", "sso.acme.alice.zz", signToken(SECRET, "initech", "x")]) {
      const r = await server.request("GET", "/api/v1/traces", bearer(token))
      expect(r.status).toBe(401)
      expect(await r.json()).toMatchObject({ code: "unauthorized", retryable: false })
    }
    expect((await server.request("GET", "/api/v1/traces", { key: null })).status).toBe(401)
  })

  test("an authenticator that fails or dies refuses with 401, never lets the request through", async () => {
    const failing = await startServer({
      extensions: [authentication({ name: "broken", authenticate: () => Effect.die(new Error("directory down")) })]
    })
    try {
      const r = await failing.request("GET", "/api/v1/traces", bearer("anything"))
      expect(r.status).toBe(401)
    } finally {
      await failing.stop()
    }
  })
})
