// A user's program instrumented with the Laminar JS SDK as its README sets it up for a self-hosted server; only
// the address, ports and key point it at Tapedeck. Its default transport is OTLP/gRPC; LMNR_FORCE_HTTP=true
// makes it export OTLP/HTTP protobuf instead. Run as a child process (its global tracer provider is its own):
//   LMNR_BASE_URL=http://127.0.0.1 LMNR_GRPC_PORT=… LMNR_HTTP_PORT=… LMNR_PROJECT_API_KEY=<Tapedeck API key> bun test/sdk-programs/laminar-js.ts
// Prints one JSON line: { traceId, flushed, error? } (traceId in OpenTelemetry's 32-hex form).
import { Laminar, LaminarAttributes, observe } from "@lmnr-ai/lmnr"

Laminar.initialize({
  projectApiKey: process.env.LMNR_PROJECT_API_KEY!,
  baseUrl: process.env.LMNR_BASE_URL!,
  grpcPort: Number(process.env.LMNR_GRPC_PORT),
  httpPort: Number(process.env.LMNR_HTTP_PORT),
  forceHttp: process.env.LMNR_FORCE_HTTP === "true",
  instrumentModules: {},
  disableBatch: true
})

let traceId = ""
const trackParcel = (id: string) =>
  observe({ name: "track_parcel", spanType: "TOOL" }, async (parcel: string) => ({ parcel, city: "Lyon" }), id)

const answer = (question: string) =>
  observe(
    { name: "answer", spanType: "LLM" },
    async (q: string) => {
      Laminar.setSpanAttributes({
        [LaminarAttributes.PROVIDER]: "openai",
        [LaminarAttributes.REQUEST_MODEL]: "gpt-4o-mini",
        [LaminarAttributes.RESPONSE_MODEL]: "gpt-4o-mini",
        [LaminarAttributes.INPUT_TOKEN_COUNT]: 120,
        [LaminarAttributes.OUTPUT_TOKEN_COUNT]: 8
      })
      return { role: "assistant", content: `${q} in Lyon` }
    },
    question
  )

await observe(
  { name: "support-run", sessionId: "sess-lmnr", userId: "user-lmnr", tags: ["support"], metadata: { tier: "gold" } },
  async (question: string) => {
    traceId = (Laminar.getTraceId() ?? "").replaceAll("-", "")
    const where = await trackParcel("P-1")
    const reply = await answer(question)
    return { answer: reply.content, where }
  },
  "where is my parcel?"
)

let flushed = true
let error: string | undefined
try {
  await Laminar.flush()
  await Laminar.shutdown()
} catch (e) {
  flushed = false
  error = String(e)
}
console.log(JSON.stringify({ traceId, flushed, ...(error ? { error } : {}) }))
