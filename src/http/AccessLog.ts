import { type HttpApp, HttpServerError, HttpServerRequest } from "@effect/platform"
import { Context, Effect, FiberRef, LogLevel } from "effect"
import { enterForeground, leaveForeground } from "#layers/jobs/Foreground"

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
 * One log line per answered request, like `HttpMiddleware.logger`, but the URL never carries a credential into
 * the logs. It also counts the requests in flight, which background work yields to (layers/jobs/Foreground.ts).
 */
let counter = 0

export const accessLog = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.withFiberRuntime((fiber) => {
    const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
    const annotations = (status: number) => ({ "http.method": request.method, "http.url": loggableUrl(request.url), "http.status": status })
    // A WebSocket or an event stream is open for hours: counted, it would hold background work back all along.
    const longLived = request.headers["upgrade"] !== undefined || (request.headers["accept"] ?? "").includes("text/event-stream")
    if (!longLived) enterForeground()
    const answered = longLived ? app : Effect.ensuring(app, Effect.sync(leaveForeground))
    // Below the minimum level the line would be dropped anyway: skip building it (its span, annotations and
    // URL cost a sixth of a small request).
    if (LogLevel.lessThan(LogLevel.Info, fiber.getFiberRef(FiberRef.currentMinimumLogLevel))) return answered
    return Effect.withLogSpan(
      Effect.flatMap(Effect.exit(answered), (exit) => {
        if (exit._tag === "Failure") {
          const [response, cause] = HttpServerError.causeResponseStripped(exit.cause)
          return Effect.zipRight(
            Effect.annotateLogs(Effect.log(cause._tag === "Some" ? cause.value : "Sent HTTP response"), annotations(response.status)),
            exit
          )
        }
        return Effect.zipRight(Effect.annotateLogs(Effect.log("Sent HTTP response"), annotations(exit.value.status)), exit)
      }),
      `http.span.${++counter}`
    )
  })
