import { describe, expect, test } from "bun:test"
import { startSpanReceiver } from "../support/SpanReceiver.ts"
import { startTestServer } from "../support/TestServer.ts"

// The service traces itself over OTLP/HTTP JSON when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/configuration.md):
// a receiver on loopback stands in for the collector.
describe("self-tracing", () => {
  test("with OTEL_EXPORTER_OTLP_ENDPOINT, a request becomes an exported server span; /health does not", async () => {
    const receiver = startSpanReceiver()
    const { spans } = receiver
    const server = await startTestServer({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint })
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
      receiver.stop()
    }
  }, 60_000)
})
