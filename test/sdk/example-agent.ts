/**
 * A small "travel booking" agent instrumented with the Tapedeck SDK, end to end: a planner model call,
 * wrapped tools (one of which fails once and is retried), and a final answer. The "model" is a local
 * function: no network besides Tapedeck.
 *
 *   TAPEDECK_URL=http://localhost:8080 TAPEDECK_API_KEY=svc_… bun test/sdk/example-agent.ts "Lisbon on 2026-06-01"
 */
import { type Run, type SpanHandle, Tapedeck, wrapModel, wrapTool } from "tapedeck/sdk"

export interface Message {
  readonly role: "system" | "user" | "assistant" | "tool"
  readonly content: string
}

export interface Flight {
  readonly id: string
  readonly from: string
  readonly to: string
  readonly date: string
  readonly price: number
}

/** A stand-in for a chat model: answers from the last user message, with OpenAI-style usage. */
const fakeChatModel = async (messages: ReadonlyArray<Message>) => {
  const last = messages.at(-1)?.content ?? ""
  const system = messages.find((m) => m.role === "system")?.content ?? ""
  const content = system.startsWith("You plan")
    ? JSON.stringify({
        steps: ["search_flights", "check_weather", "book_flight"],
        destination: last.match(/to (\w+)/)?.[1] ?? "LIS"
      })
    : `Booked! ${last}`
  const promptTokens = messages.reduce((n, m) => n + Math.ceil(m.content.length / 4), 0)
  return {
    content,
    model: "gpt-4o-2024-08-06",
    usage: { prompt_tokens: promptTokens, completion_tokens: Math.ceil(content.length / 4) }
  }
}

const FLIGHTS: ReadonlyArray<Flight> = [
  { id: "TP1351", from: "CDG", to: "LIS", date: "2026-06-01", price: 182 },
  { id: "AF1024", from: "CDG", to: "LIS", date: "2026-06-01", price: 149 }
]

export interface TripResult {
  readonly runId: string
  readonly agentSpanId: string
  readonly answer: string
  readonly confirmation: string
}

/** The agent: plans, searches, checks the weather (flaky: fails the first time), books, answers. */
export const bookTrip = async (tapedeck: Tapedeck, request: string): Promise<TripResult> => {
  const run: Run = tapedeck.startRun({
    name: "travel-booking",
    input: { request },
    sessionId: "travel-chat-1",
    metadata: { agent: "travel-booker", version: "1.0" }
  })
  const agent: SpanHandle = run.startSpan({
    type: "action",
    name: "travel-agent",
    agentId: "travel-agent",
    agentRole: "orchestrator",
    input: { request }
  })

  const planner = wrapModel(agent, "gpt-4o-mini", fakeChatModel, { name: "plan", agentId: "travel-agent" })
  const writer = wrapModel(agent, "gpt-4o", fakeChatModel, { name: "answer", agentId: "travel-agent" })
  const searchFlights = wrapTool(agent, "search_flights", async (query: { to: string; date: string }) =>
    FLIGHTS.filter((f) => f.to === query.to && f.date === query.date).sort((a, b) => a.price - b.price)
  )
  let weatherCalls = 0
  const checkWeather = wrapTool(agent, "check_weather", async (city: string) => {
    if (weatherCalls++ === 0) throw new Error("weather service timed out")
    return { city, forecast: "sunny", celsius: 24 }
  })
  const bookFlight = wrapTool(agent, "book_flight", (flight: Flight) => ({
    confirmation: `CONF-${flight.id}`,
    price: flight.price
  }))

  try {
    const plan = JSON.parse(
      (
        await planner([
          { role: "system", content: "You plan trips. Answer with JSON." },
          { role: "user", content: request }
        ])
      ).content
    ) as { steps: string[]; destination: string }
    const thinking = agent.startSpan({ type: "reasoning", name: "choose-flight", input: plan })
    const flights = await searchFlights({ to: plan.destination, date: "2026-06-01" })
    const cheapest = flights[0]
    if (!cheapest) throw new Error("no flight found")
    thinking.end({ output: { chosen: cheapest.id, reason: "cheapest" } })
    const weather = await checkWeather("Lisbon").catch(() => checkWeather("Lisbon"))
    const booking = bookFlight(cheapest)
    const answer = (
      await writer([
        { role: "system", content: "You write the final answer." },
        {
          role: "user",
          content: `Flight ${cheapest.id} for ${booking.price} EUR, ${weather.forecast} and ${weather.celsius}°C`
        }
      ])
    ).content
    agent.end({ output: { answer, confirmation: booking.confirmation } })
    await run.finish({ status: "completed", output: { answer, confirmation: booking.confirmation } })
    return { runId: run.id, agentSpanId: agent.id, answer, confirmation: booking.confirmation }
  } catch (error) {
    agent.end({ error })
    await run.finish({ status: "failed", error })
    throw error
  }
}

if (import.meta.main) {
  const tapedeck = new Tapedeck({
    baseUrl: process.env.TAPEDECK_URL ?? "http://localhost:8080",
    apiKey: process.env.TAPEDECK_API_KEY ?? "",
    onError: (e) => console.error(`tapedeck: ${e.message}`)
  })
  const result = await bookTrip(tapedeck, process.argv[2] ?? "Fly me to LIS on 2026-06-01")
  await tapedeck.close()
  console.log(result, tapedeck.stats())
}
