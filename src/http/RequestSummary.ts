import { Duration, Effect, Layer, Schedule } from "effect"
import { AppConfig } from "#layers/config/AppConfig"

/** Requests answered since the last summary, by status class, and the slowest of them. */
interface Tally {
  requests: number
  s2xx: number
  s3xx: number
  s4xx: number
  s5xx: number
  slowestMs: number
}

const empty = (): Tally => ({ requests: 0, s2xx: 0, s3xx: 0, s4xx: 0, s5xx: 0, slowestMs: 0 })

/**
 * Counts the requests the instance answers, so that a quiet log (no access lines by default) still says once a
 * period how busy the instance was and how it answered. Recording is a few additions on the request's fiber.
 */
export class RequestSummary extends Effect.Service<RequestSummary>()("tapedeck/RequestSummary", {
  // A tally per application built (tests run several in one process), not per module.
  sync: () => {
    let tally = empty()
    return {
      record: (status: number, durationMs: number) => {
        tally.requests++
        if (status >= 500) tally.s5xx++
        else if (status >= 400) tally.s4xx++
        else if (status >= 300) tally.s3xx++
        else tally.s2xx++
        if (durationMs > tally.slowestMs) tally.slowestMs = durationMs
      },
      /** The tally since the last call, which starts a new one. */
      take: (): Tally => {
        const taken = tally
        tally = empty()
        return taken
      }
    }
  }
}) {}

/** The summary's log line for one period; nothing when no request came. */
export const logSummary = (tally: Tally, periodSeconds: number) =>
  tally.requests === 0
    ? Effect.void
    : Effect.logInfo(`requests answered in the last ${periodSeconds} s`).pipe(
        Effect.annotateLogs({
          requests: tally.requests,
          "2xx": tally.s2xx,
          "3xx": tally.s3xx,
          "4xx": tally.s4xx,
          "5xx": tally.s5xx,
          slowest_ms: Math.round(tally.slowestMs)
        })
      )

/** Logs the summary every TAPEDECK_LOG_SUMMARY_SECONDS (0: never). */
export const RequestSummaryLogLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const { logSummarySeconds } = yield* AppConfig
    const summary = yield* RequestSummary
    if (logSummarySeconds <= 0) return
    yield* Effect.suspend(() => logSummary(summary.take(), logSummarySeconds)).pipe(
      Effect.delay(Duration.seconds(logSummarySeconds)),
      Effect.repeat(Schedule.forever),
      Effect.forkScoped
    )
  })
)
