import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
}, 60_000)
afterAll(() => server.stop(), 60_000)

const get = async (target: TestServer, path: string, headers: Record<string, string> = {}) => {
  const response = await target.request("GET", path, { key: null, headers })
  return { response, status: response.status, body: (await response.json()) as any }
}

describe("OAuth discovery metadata", () => {
  test("protected resource metadata (RFC 9728): public, derived from the request's host by default", async () => {
    const { response, status, body } = await get(server, "/.well-known/oauth-protected-resource")
    expect(status).toBe(200)
    expect(response.headers.get("content-type")).toContain("application/json")
    expect(body).toMatchObject({
      resource: server.url,
      authorization_servers: [server.url],
      bearer_methods_supported: ["header"],
      scopes_supported: [],
      resource_documentation: `${server.url}/docs`,
      tapedeck_api_key_header: "x-service-key",
      tapedeck_api_key_prefix: "svc_"
    })
    const behindProxy = await get(server, "/.well-known/oauth-protected-resource", { "x-forwarded-proto": "https" })
    expect(behindProxy.body.resource).toBe(server.url.replace("http:", "https:"))
    // Credentials are not needed, and bad ones are not refused either.
    expect((await server.get("/.well-known/oauth-protected-resource", "svc_not_a_real_key")).status).toBe(200)
  }, 60_000)

  test("authorization server metadata (RFC 8414) at the auth URL, which defaults to this server", async () => {
    const { status, body } = await get(server, "/.well-known/oauth-authorization-server")
    expect(status).toBe(200)
    expect(body).toEqual({
      issuer: server.url,
      token_endpoint: `${server.url}/api/v1/api-keys`,
      response_types_supported: [],
      grant_types_supported: [],
      scopes_supported: [],
      token_endpoint_auth_methods_supported: [],
      service_documentation: `${server.url}/docs`
    })
    // The issuer is the protected resource's authorization server.
    expect((await get(server, "/.well-known/oauth-protected-resource")).body.authorization_servers).toEqual([
      body.issuer
    ])
  }, 60_000)

  test("both documents are in the OpenAPI document, without security", async () => {
    const spec = (await (await server.get("/openapi.json", null)).json()) as any
    for (const path of ["/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server"]) {
      expect(spec.paths[path]?.get).toBeDefined()
      expect(spec.paths[path].get.security ?? []).toEqual([])
    }
    expect(spec.paths["/api/v1/api-keys"]?.post).toBeDefined()
    expect(spec.paths["/api/v1/sessions/{sessionId}/graph"]?.get).toBeDefined()
    expect(spec.paths["/api/v1/usage"]?.get).toBeDefined()
    expect(spec.paths["/api/v1/batch"]?.post?.responses?.["202"]).toBeDefined()
  }, 60_000)

  test("TAPEDECK_PUBLIC_URL and TAPEDECK_AUTH_URL: an external authorization server publishes its own metadata", async () => {
    const configured = await startTestServer({
      TAPEDECK_PUBLIC_URL: "https://tapedeck.example.com/",
      TAPEDECK_AUTH_URL: "https://auth.example.com",
      TAPEDECK_JWT_SECRET: "a-test-secret-of-some-length-0123456789"
    })
    try {
      const resource = await get(configured, "/.well-known/oauth-protected-resource")
      expect(resource.body).toMatchObject({
        resource: "https://tapedeck.example.com",
        authorization_servers: ["https://auth.example.com"],
        resource_documentation: "https://tapedeck.example.com/docs",
        tapedeck_token_types_supported: ["api_key", "jwt"]
      })
      const server = await get(configured, "/.well-known/oauth-authorization-server")
      expect(server.status).toBe(404)
      expect(server.body).toMatchObject({ code: "not_found" })
    } finally {
      await configured.stop()
    }
    const self = await startTestServer({
      TAPEDECK_PUBLIC_URL: "https://api.example.com",
      TAPEDECK_AUTH_URL: "https://api.example.com/"
    })
    try {
      expect((await get(self, "/.well-known/oauth-authorization-server")).body).toMatchObject({
        issuer: "https://api.example.com",
        token_endpoint: "https://api.example.com/api/v1/api-keys"
      })
    } finally {
      await self.stop()
    }
  }, 120_000)
})
