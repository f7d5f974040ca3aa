import { HttpServer } from "@effect/platform"
import { Effect } from "effect"
import { requestsInFlight } from "#layers/jobs/Foreground"
import { errorBody, Unavailable } from "../api/ApiErrors.ts"
import { healthBody, type healthBuild } from "./SystemHttp.ts"

/** A stopping instance closes once no request has come for this long (the ones sent before the SIGTERM are answered). */
const QUIET_MS = 100

type State = "starting" | "serving" | "stopping"

/**
 * Bun's routes in front of the Effect app, and the instance's lifecycle around it. `/health` is answered here for
 * good: a probe costs microseconds and does not queue behind the app's work when it is overloaded (SystemHttp's
 * handler answers the same body elsewhere). While the app is not served (starting: migrations, routes; stopping:
 * a SIGTERM), every path answers 503 `unavailable` with Retry-After: Bun's own answer then is a bare 404, which an
 * OTLP exporter takes as final and drops its batch.
 */
export const makeLifecycleRoutes = (build: ReturnType<typeof healthBuild>, drainSeconds: number) => {
  let state: State = "starting"
  // Route handlers are the only place Bun hands its server out; the hand-offs need it to reload the routes.
  let server: Bun.Server<unknown> | undefined
  let refusedAt = 0
  const health = {
    "/health": {
      GET: (_request: Request, from: Bun.Server<unknown>) => {
        server ??= from
        return state === "serving" ? Response.json(healthBody(build, Date.now())) : refusal(state)
      }
    }
  }
  const routes = {
    ...health,
    "/*": (request: Request, from: Bun.Server<unknown>) => {
      server ??= from
      if (state !== "serving") {
        refusedAt = Date.now()
        return refusal(state)
      }
      // Served, and the hand-off had no server to reload (no request had come in yet): this request does it.
      from.reload({ routes: health } as Bun.ServeOptions)
      // A WebSocket cannot be upgraded through server.fetch: the client's retry reaches the app.
      return request.headers.get("upgrade") === null ? from.fetch(request) : refusal("starting")
    }
  }

  /** The app is served: /health answers 200 and the catch-all steps aside (learning the server from a probe of our own if none came in). */
  const served = Effect.gen(function*() {
    state = "serving"
    if (server === undefined) {
      const address = (yield* HttpServer.HttpServer).address
      if (address._tag === "TcpAddress") {
        const host = address.hostname === "0.0.0.0"
          ? "127.0.0.1"
          : address.hostname === "::"
          ? "[::1]"
          : address.hostname.includes(":")
          ? `[${address.hostname}]`
          : address.hostname
        // Bounded by the fetch itself: this runs uninterruptibly (an acquire), where Effect.timeout could not stop it,
        // and a probe that hung would hold a SIGTERM up with it.
        yield* Effect.promise(() =>
          fetch(`http://${host}:${address.port}/health`, { signal: AbortSignal.timeout(2000) })
            .then((r) => r.arrayBuffer())
            .catch(() => undefined)
        )
      }
    }
    if (server !== undefined) server.reload({ routes: health } as Bun.ServeOptions)
  })

  /**
   * Stopping (the app's scope is closing): new requests are refused with 503 at once; the ones in flight get up to
   * `drainSeconds` to finish, and requests already sent but not yet read (they queue while the event loop is busy)
   * are read and refused, until none has come for QUIET_MS. Then the listener closes, and the app, its pools and its
   * request fibers after it.
   */
  const stopping = Effect.gen(function*() {
    state = "stopping"
    refusedAt = Date.now()
    if (server !== undefined) server.reload({ routes } as Bun.ServeOptions)
    const deadline = Date.now() + drainSeconds * 1000
    while ((requestsInFlight() > 0 || Date.now() - refusedAt < QUIET_MS) && Date.now() < deadline) {
      yield* Effect.sleep("10 millis")
    }
    if (requestsInFlight() > 0) {
      yield* Effect.logWarning(`stopping with ${requestsInFlight()} requests still in flight after ${drainSeconds} s`)
    }
    if (server !== undefined) {
      // Bounded by a timer of its own: a release runs uninterruptibly, where Effect.timeout could not stop the wait.
      const stopped = server.stop(false)
      const ms = Math.max(100, deadline - Date.now())
      yield* Effect.promise(() => Promise.race([stopped, new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]))
    }
  })

  /** Served for as long as the scope is open; stopping when it closes. */
  const lifecycle = Effect.acquireRelease(served, () => stopping)

  return { routes, lifecycle } as const
}

const refusal = (state: State) =>
  Response.json(
    errorBody(new Unavailable({ message: state === "stopping" ? "stopping" : "starting" })),
    // Stopping: the client's next attempt opens a new connection, which reaches another instance, or is refused.
    { status: 503, headers: state === "stopping" ? { "retry-after": "1", connection: "close" } : { "retry-after": "1" } }
  )
