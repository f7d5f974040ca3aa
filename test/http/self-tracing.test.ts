import { describe, expect, test } from "bun:test"
import { startTestServer } from "../support/TestServer.ts"

// The service traces itself over OTLP/HTTP JSON when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/configuration.md):
// a receiver on loopback stands in for the collector.
describe("self-tracing", () => {
  test("with OTEL_EXPORTER_OTLP_ENDPOINT, a request becomes an exported server span; /health does not", async () => {
    const spans: Array<{ name: string; attributes: Array<{ key: string; value: { stringValue?: string } }> }> = []
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (req) => {
        if (new URL(req.url).pathname === "/v1/traces") {
          const body = (await req.json()) as any
          for (const rs of body.resourceSpans ?? [])
            for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []))
        }
        return Response.json({})
      }
    })
    const server = await startTestServer({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.port}` })
    try {
      expect((await server.get("/health")).status).toBe(200)
      expect((await server.get("/api/v1/traces?limit=1")).status).toBe(200)
      const deadline = Date.now() + 20_000
      const isList = (s: (typeof spans)[number]) =>
        s.name === "http.server GET" &&
        s.attributes.some((a) => a.key === "url.path" && a.value.stringValue === "/api/v1/traces")
      while (!spans.some(isList) && Date.now() < deadline) await Bun.sleep(200)
      expect(spans.some(isList)).toBe(true)
      expect(
        spans.some((s) => s.attributes.some((a) => a.key === "url.path" && a.value.stringValue === "/health"))
      ).toBe(false)
    } finally {
      await server.stop()
      receiver.stop(true)
    }
  }, 60_000)
})
