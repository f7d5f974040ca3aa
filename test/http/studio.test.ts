import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
})
afterAll(() => server.stop())

const plain = (path: string, headers: Record<string, string> = {}) =>
  fetch(server.url + path, { headers, redirect: "manual" })

/** The hashed script and style names the shell page loads. */
const assetNames = (html: string) => [...html.matchAll(/\/ui\/assets\/([^"]+)"/g)].map((m) => m[1]!)

describe("Studio serving", () => {
  test("/ redirects to /ui", async () => {
    const response = await plain("/")
    expect(response.status).toBe(302)
    expect(response.headers.get("location")).toBe("/ui")
  })

  test("every /ui deep link answers the same shell, without credentials, revalidated each time", async () => {
    const pages = [
      "/ui",
      "/ui/traces",
      `/ui/traces/${crypto.randomUUID()}?span=${crypto.randomUUID()}`,
      "/ui/search?q=refund",
      "/ui/forks/x",
      "/ui/enforcement"
    ]
    const bodies = await Promise.all(
      pages.map(async (path) => {
        const response = await plain(path)
        expect(response.status).toBe(200)
        expect(response.headers.get("content-type")).toStartWith("text/html")
        expect(response.headers.get("cache-control")).toBe("no-cache")
        return response.text()
      })
    )
    expect(new Set(bodies).size).toBe(1)
    expect(bodies[0]).toContain(`<div id="root"></div>`)
    expect(assetNames(bodies[0]!).some((name) => name.endsWith(".js"))).toBe(true)
  })

  test("assets are public, hashed, cacheable for good, and gzip when asked", async () => {
    const html = await (await plain("/ui")).text()
    for (const name of assetNames(html)) {
      expect(name).toMatch(/-[a-z0-9]{6,}\.(js|css)$/)
      const raw = await plain(`/ui/assets/${name}`, { "accept-encoding": "identity" })
      expect(raw.status).toBe(200)
      expect(raw.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
      expect(raw.headers.get("content-encoding")).toBeNull()
      const body = new Uint8Array(await raw.arrayBuffer())
      const zipped = await plain(`/ui/assets/${name}`, { "accept-encoding": "gzip, deflate" })
      expect(zipped.headers.get("content-encoding")).toBe("gzip")
      // fetch inflates it: the same bytes as the plain answer.
      expect(new Uint8Array(await zipped.arrayBuffer())).toEqual(body)
      const refused = await plain(`/ui/assets/${name}`, { "accept-encoding": "gzip;q=0, identity" })
      expect(refused.headers.get("content-encoding")).toBeNull()
    }
  })

  test("an unknown asset is a 404 with the error body; API routes still need a key", async () => {
    const missing = await plain("/ui/assets/main-nothere.js")
    expect(missing.status).toBe(404)
    expect(await missing.json()).toEqual({ error: "asset not found", code: "not_found", retryable: false })
    const malformed = await plain("/ui/assets/%zz.js")
    expect(malformed.status).toBe(400)
    const api = await plain("/api/v1/traces")
    expect(api.status).toBe(401)
  })
})
