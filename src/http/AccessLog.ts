import { type HttpApp, HttpServerError, HttpServerRequest } from "@effect/platform"
import { Context, Effect, Exit, FiberRef, LogLevel } from "effect"
import { enterForeground, leaveForeground } from "#layers/jobs/Foreground"
import type { RequestSummary } from "./RequestSummary.ts"

/** Query parameters that may carry a credential (the live stream's `?token=` for browsers, and common aliases). */
const SECRET_PARAMS = /^(token|access_token|api_key|apikey|key|x-service-key|secret|password)$/i

/** The request's URL as logged: path and query, with the value of every credential-bearing parameter redacted. */
export const loggableUrl = (url: string) => {
  const q = url.indexOf("?")
  if (q < 0) return url
  const params = new URLSearchParams(url.slice(q + 1))
  let redacted = false
  for (const name of [...params.keys()]) {
    if (SECRET_PARAMS.test(name)) {
      params.set(name, "[redacted]")
      redacted = true
    }
  }
  return redacted ? `${url.slice(0, q)}?${params.toString()}` : url
}

/**
 * Every answered request is counted for the periodic summary (RequestSummary.ts), and counted while in flight, which
 * background work yields to (layers/jobs/Foreground.ts). With `log` (TAPEDECK_ACCESS_LOG) it also gets one log line,
 * like `HttpMiddleware.logger`'s, but the URL never carries a credential into the logs.
 */
let counter = 0

export interface AccessLogOptions {
  readonly log: boolean
  readonly summary: RequestSummary
}

const statusOf = <A extends { readonly status: number }, E>(exit: Exit.Exit<A, E>) =>
  exit._tag === "Success" ? exit.value.status : HttpServerError.causeResponseStripped(exit.cause)[0].status

export const accessLog =
  ({ log, summary }: AccessLogOptions) =>
  <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.withFiberRuntime((fiber) => {
      const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
      const annotations = (status: number) => ({
        "http.method": request.method,
        "http.url": loggableUrl(request.url),
        "http.status": status
      })
      // A WebSocket or an event stream is open for hours: counted, it would hold background work back all along.
      const longLived =
        request.headers["upgrade"] !== undefined || (request.headers["accept"] ?? "").includes("text/event-stream")
      if (!longLived) enterForeground()
      const started = performance.now()
      const done = (status: number) => {
        if (!longLived) leaveForeground()
        summary.record(status, performance.now() - started)
      }
      // Counted as the answer passes, without `onExit`'s uninterruptible region and cleanup effect: the server runs
      // its app uninterruptibly already, and the count is plain code (every request comes here).
      const answered = Effect.matchCauseEffect(app, {
        onFailure: (cause) => {
          done(statusOf(Exit.failCause(cause)))
          return Effect.failCause(cause)
        },
        onSuccess: (response) => {
          done(response.status)
          return Effect.succeed(response)
        }
      })
      // Without the access log, or below its level, the line would be dropped anyway: skip building it (its span,
      // annotations and URL cost a sixth of a small request).
      if (!log || LogLevel.lessThan(LogLevel.Info, fiber.getFiberRef(FiberRef.currentMinimumLogLevel))) return answered
      return Effect.withLogSpan(
        Effect.flatMap(Effect.exit(answered), (exit) => {
          if (exit._tag === "Failure") {
            const [response, cause] = HttpServerError.causeResponseStripped(exit.cause)
            return Effect.zipRight(
              Effect.annotateLogs(
                Effect.log(cause._tag === "Some" ? cause.value : "Sent HTTP response"),
                annotations(response.status)
              ),
              exit
            )
          }
          return Effect.zipRight(
            Effect.annotateLogs(Effect.log("Sent HTTP response"), annotations(exit.value.status)),
            exit
          )
        }),
        `http.span.${++counter}`
      )
    })
