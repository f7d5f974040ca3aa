// An OTLP/HTTP JSON receiver on loopback standing in for the collector a self-tracing server exports to.

export type ExportedAttribute = { key: string; value: { stringValue?: string; intValue?: string | number } }
export type ExportedSpan = { name: string; attributes: Array<ExportedAttribute> }

/** The receiver's address (for OTEL_EXPORTER_OTLP_ENDPOINT), the spans it got so far, and its stop. */
export const startSpanReceiver = () => {
  const spans: Array<ExportedSpan> = []
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      if (new URL(req.url).pathname === "/v1/traces") {
        const body = (await req.json()) as any
        for (const rs of body.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []))
      }
      return Response.json({})
    }
  })
  return { endpoint: `http://127.0.0.1:${server.port}`, spans, stop: () => server.stop(true) } as const
}
