import { Effect } from "effect"

/**
 * How many HTTP requests this process is answering right now. Background work that burns CPU on the one
 * JavaScript thread (embedding spans for search) yields to them, so a burst of ingestion is not slowed by the
 * indexing it causes. Per process by nature: it describes this event loop, not shared state.
 */
let inFlight = 0

export const enterForeground = () => {
  inFlight++
}

export const leaveForeground = () => {
  inFlight--
}

/**
 * Waits while requests are in flight, polling every few milliseconds, but never longer than `maxWaitMs`: under
 * a load that never pauses, background work still gets one step per `maxWaitMs`.
 */
export const yieldToForeground = (maxWaitMs: number) =>
  Effect.gen(function* () {
    const deadline = Date.now() + maxWaitMs
    while (inFlight > 0 && Date.now() < deadline) yield* Effect.sleep("5 millis")
  })

/** The requests this process is answering now that background work waits for. */
export const requestsInFlight = () => inFlight
