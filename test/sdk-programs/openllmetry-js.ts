// A user's program instrumented with OpenLLMetry (@traceloop/node-server-sdk) as its README sets it up; only the
// base URL and API key point it at Tapedeck, and the OpenAI client at a stand-in model server. Run as a child
// process (its global tracer provider is its own):
//   TRACELOOP_BASE_URL=<Tapedeck URL> TRACELOOP_API_KEY=<Tapedeck API key> OPENAI_BASE_URL=… bun test/sdk-programs/openllmetry-js.ts
// Prints one JSON line: { traceId, flushed, error? }.
import { trace } from "@opentelemetry/api"
import * as traceloop from "@traceloop/node-server-sdk"
import OpenAI from "openai"

traceloop.initialize({
  appName: "support-app",
  baseUrl: process.env.TRACELOOP_BASE_URL!,
  apiKey: process.env.TRACELOOP_API_KEY!,
  disableBatch: true,
  instrumentModules: { openAI: OpenAI },
  silenceInitializationMessage: true
})

const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL!, apiKey: "sk-test" })

let traceId = ""
await traceloop.withWorkflow(
  { name: "support-run", associationProperties: { session_id: "sess-ol", user_id: "user-ol" } },
  async () => {
    traceId = trace.getActiveSpan()?.spanContext().traceId ?? ""
    const where = await traceloop.withTool({ name: "track_parcel" }, async () => ({ parcel: "P-1", city: "Lyon" }))
    const completion = await openai.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: `where is my parcel? ${JSON.stringify(where)}` }]
    })
    return completion.choices[0]?.message.content
  }
)

let flushed = true
let error: string | undefined
try {
  await traceloop.forceFlush()
} catch (e) {
  flushed = false
  error = String(e)
}
console.log(JSON.stringify({ traceId, flushed, ...(error ? { error } : {}) }))
