// A user's program instrumented with Phoenix (@arizeai/phoenix-otel) and OpenInference's OpenAI instrumentation as
// their READMEs set them up; only the collector URL and API key point it at Tapedeck, and the OpenAI client at a
// stand-in model server. Run as a child process (its global tracer provider is its own):
//   PHOENIX_COLLECTOR_ENDPOINT=<Tapedeck URL> PHOENIX_API_KEY=<Tapedeck API key> OPENAI_BASE_URL=… bun test/sdk-programs/phoenix-js.ts
// Prints one JSON line: { traceId, flushed, error? }.
import { OpenAIInstrumentation } from "@arizeai/openinference-instrumentation-openai"
import { context, register, setMetadata, setSession, setTags, setUser, trace } from "@arizeai/phoenix-otel"
import OpenAI from "openai"

const instrumentation = new OpenAIInstrumentation()
instrumentation.manuallyInstrument(OpenAI)
const provider = register({
  projectName: "support-app",
  url: process.env.PHOENIX_COLLECTOR_ENDPOINT!,
  apiKey: process.env.PHOENIX_API_KEY!,
  batch: false,
  instrumentations: [instrumentation]
})

const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL!, apiKey: "sk-test" })
const tracer = trace.getTracer("support-app")

let traceId = ""
let ctx = setSession(context.active(), { sessionId: "sess-px" })
ctx = setUser(ctx, { userId: "user-px" })
ctx = setMetadata(ctx, { tier: "gold" })
ctx = setTags(ctx, ["support"])
await context.with(ctx, () =>
  tracer.startActiveSpan("support-run", async (span) => {
    traceId = span.spanContext().traceId
    span.setAttribute("openinference.span.kind", "AGENT")
    span.setAttribute("input.value", "where is my parcel?")
    const completion = await openai.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "where is my parcel?" }]
    })
    span.setAttribute("output.value", completion.choices[0]?.message.content ?? "")
    span.end()
  })
)

let flushed = true
let error: string | undefined
try {
  await provider.forceFlush()
  await provider.shutdown()
} catch (e) {
  flushed = false
  error = String(e)
}
console.log(JSON.stringify({ traceId, flushed, ...(error ? { error } : {}) }))
