/**
 * A small agent recorded with @tapedeck/sdk on plain Node (no TypeScript, no Bun), which then serves SDK-mode
 * replays of its own runs. The "model" is a local function, so nothing but Tapedeck is contacted.
 *
 *   npm install @tapedeck/sdk
 *   TAPEDECK_URL=http://localhost:8080 TAPEDECK_API_KEY=svc_… node --experimental-websocket node-agent.mjs "Weekend in Lisbon"
 *
 * (`--experimental-websocket` only on Node 20 and 21: Node 22+ has WebSocket built in.) It prints
 * `{"recorded":"<trace id>"}`, then `{"ready":true}` once it serves replays, until stopped (Ctrl-C).
 */
import { Tapedeck, wrapModel, wrapTool } from "@tapedeck/sdk"

const AGENT = "weekend-planner"
const say = (event) => console.log(JSON.stringify(event))

/** A stand-in for a chat model, answering with OpenAI-style usage (Tapedeck prices it from the model name). */
const chat = async (prompt) => ({
  content: `Go to ${prompt.split(" ").at(-1)}`,
  model: "gpt-4o-mini-2024-07-18",
  usage: { prompt_tokens: 1200, completion_tokens: 300 }
})

/** The agent: asks the model where to go, looks the city up with a tool, answers. */
const planWeekend = async (run, request, tool) => {
  const plan = await wrapModel(run, "gpt-4o-mini-2024-07-18", chat, { name: "plan" })(request)
  const city = plan.content.split(" ").at(-1)
  const info = await tool("lookup_city", async (name) => ({ city: name, rating: 3 }))(city)
  return { plan: plan.content, info }
}

const tapedeck = new Tapedeck({
  baseUrl: process.env.TAPEDECK_URL ?? "http://localhost:8080",
  apiKey: process.env.TAPEDECK_API_KEY ?? "",
  flushIntervalMs: 50,
  onError: (error) => console.error(`tapedeck: ${error.message}`)
})

const request = process.argv[2] ?? "Weekend in Lisbon"
const run = tapedeck.startRun({ name: AGENT, input: request })
const output = await planWeekend(run, request, (name, fn) => wrapTool(run, name, fn))
await run.finish({ output })
await tapedeck.flush()
say({ recorded: run.id })

const replays = tapedeck.connectReplay({
  agents: { [AGENT]: (context) => planWeekend(context.run, String(context.modifiedInput), context.tool) },
  onError: (error) => console.error(`tapedeck replay: ${error.message}`)
})
await replays.ready
say({ ready: true })
