import { Effect } from "effect"

/**
 * How many HTTP requests this process is answering right now. Background work that burns CPU on the one
 * JavaScript thread (embedding spans for search) yields to them, so a burst of ingestion is not slowed by the
 * indexing it causes. Per process by nature: it describes this event loop, not shared state.
 */
let inFlight = 0
/** Until when background work also waits for another instance's checks (layers/enforcement/ClusterPressure.ts). */
let heldUntil = 0

export const enterForeground = () => {
  inFlight++
}

export const leaveForeground = () => {
  inFlight--
}

/**
 * Background work of this process waits until `until` whatever its own requests: another instance's enforcement
 * checks keep waiting, and on a shared machine or database this process's background work is in their way too.
 */
export const holdBackground = (until: number) => {
  heldUntil = Math.max(heldUntil, until)
}

/** Whether background work is held now (see holdBackground). */
export const backgroundHeld = () => heldUntil > Date.now()

/** Waits while `busy()`, polling every few milliseconds, but never longer than `maxWaitMs`. */
const waitWhile = (busy: () => boolean, maxWaitMs: number) =>
  Effect.gen(function* () {
    const deadline = Date.now() + maxWaitMs
    while (busy() && Date.now() < deadline) yield* Effect.sleep("5 millis")
  })

/**
 * Waits while requests are in flight or background work is held, but never longer than `maxWaitMs`: under a load
 * that never pauses, background work still gets one step per `maxWaitMs`. For work that burns this thread's CPU.
 */
export const yieldToForeground = (maxWaitMs: number) => waitWhile(() => inFlight > 0 || backgroundHeld(), maxWaitMs)

/**
 * Waits while background work is held (checks under pressure, here or on another instance), never longer than
 * `maxWaitMs`. For background work that loads the database rather than this thread, such as the retention purge.
 */
export const waitWhileHeld = (maxWaitMs: number) => waitWhile(backgroundHeld, maxWaitMs)

/** The requests this process is answering now that background work waits for. */
export const requestsInFlight = () => inFlight
