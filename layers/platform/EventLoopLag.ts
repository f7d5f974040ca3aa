import { Effect } from "effect"

/** How often the loop is asked to run a timer: each run is a sample of how late it came. */
const SAMPLE_MS = 5
/** The samples averaged: the loop's recent state, not one long task's moment. */
const WINDOW_MS = 100

/**
 * How late this process's event loop runs what it is given: a timer every SAMPLE_MS, each run's delay past its due
 * time a sample. A request that arrives waits about that long before its first line of JavaScript runs, and again
 * after each of its database round trips, whatever its own work costs; the server's own timings do not see it.
 */
export class EventLoopLag extends Effect.Service<EventLoopLag>()("tapedeck/EventLoopLag", {
  scoped: Effect.gen(function* () {
    const samples: Array<{ readonly at: number; readonly lag: number }> = []
    let last = performance.now()
    let timer: ReturnType<typeof setInterval> | undefined
    const tick = () => {
      const now = performance.now()
      samples.push({ at: now, lag: Math.max(0, now - last - SAMPLE_MS) })
      while (samples.length > 0 && samples[0]!.at < now - WINDOW_MS) samples.shift()
      last = now
    }
    /** Sampling starts with the first question: an instance that never asks (shedding off) runs no timer. */
    const start = () => {
      last = performance.now()
      timer = setInterval(tick, SAMPLE_MS)
      // A sampler never keeps the process alive on its own.
      timer.unref?.()
    }
    yield* Effect.addFinalizer(() => Effect.sync(() => timer !== undefined && clearInterval(timer)))

    /**
     * The mean delay of the last WINDOW_MS's timer runs, in ms; or the delay of the run now overdue, when that is
     * longer (a loop blocked for the whole window runs no timer to report it). The first question starts the
     * sampling (and is answered 0).
     */
    const recentMs = () => {
      if (timer === undefined) start()
      const overdue = performance.now() - last - SAMPLE_MS
      let sum = 0
      for (const s of samples) sum += s.lag
      return Math.max(overdue, samples.length === 0 ? 0 : sum / samples.length)
    }

    return { recentMs } as const
  })
}) {}
