// A user's program instrumented with the Langfuse JS SDK exactly as its README sets it up; only the base URL and
// keys point at Tapedeck. Run as a child process (its global tracer provider is its own):
//   LANGFUSE_BASE_URL=… LANGFUSE_SECRET_KEY=<Tapedeck API key> bun test/sdk-programs/langfuse-js.ts
// Prints one JSON line: { traceId, flushed, error? }.
import { LangfuseSpanProcessor } from "@langfuse/otel"
import { propagateAttributes, setActiveTraceIO, startActiveObservation, startObservation } from "@langfuse/tracing"
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node"

const processor = new LangfuseSpanProcessor({
  baseUrl: process.env.LANGFUSE_BASE_URL!,
  publicKey: "pk-lf-tapedeck",
  secretKey: process.env.LANGFUSE_SECRET_KEY!,
  environment: "staging",
  release: "2026.11.3",
  exportMode: "immediate"
})
const provider = new NodeTracerProvider({ spanProcessors: [processor] })
provider.register()

let traceId = ""
await startActiveObservation(
  "support-run",
  async (agent) => {
    traceId = agent.traceId
    await propagateAttributes(
      {
        userId: "user-lf",
        sessionId: "sess-lf",
        tags: ["support"],
        metadata: { tier: "gold" },
        version: "agent-v7",
        traceName: "parcel-support"
      },
      async () => {
        agent.update({ input: { question: "where is my parcel?" }, metadata: { step: "root" } })
        setActiveTraceIO({ input: { question: "where is my parcel?", channel: "chat" } })
        const cache = startObservation("cache_lookup", { input: { key: "P-1" } })
        cache.update({ level: "ERROR", statusMessage: "cache unavailable: connection refused" }).end()
        const generation = startObservation(
          "answer",
          {
            model: "gpt-4o-mini",
            modelParameters: { temperature: 0.2, max_tokens: 256 },
            input: [{ role: "user", content: "where is my parcel?" }],
            metadata: { attempt: 1, route: "primary" },
            prompt: { name: "support-answer", version: 3, isFallback: false }
          },
          { asType: "generation" }
        )
        generation
          .update({
            completionStartTime: new Date(Date.UTC(2026, 10, 26, 12, 0, 0, 250)),
            output: { role: "assistant", content: "in Lyon" },
            usageDetails: { input: 120, output: 8, input_cached_tokens: 100 },
            costDetails: { input: 0.0012, input_cached_tokens: 0.0001, output: 0.0004 }
          })
          .end()
        const tool = startObservation("track_parcel", { input: { id: "P-1" } }, { asType: "tool" })
        tool.update({ output: { city: "Lyon" } }).end()
        agent.update({ output: { answer: "in Lyon" } })
        setActiveTraceIO({ output: { answer: "in Lyon", resolved: true } })
      }
    )
  },
  { asType: "agent" }
)

let flushed = true
let error: string | undefined
try {
  await processor.forceFlush()
  await provider.shutdown()
} catch (e) {
  flushed = false
  error = String(e)
}
console.log(JSON.stringify({ traceId, flushed, ...(error ? { error } : {}) }))
