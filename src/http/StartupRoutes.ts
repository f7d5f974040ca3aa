import { HttpServer } from "@effect/platform"
import { Effect } from "effect"
import { healthBody, type healthBuild } from "./SystemHttp.ts"

/**
 * Bun's routes in front of the Effect app. `/health` is answered here for good: a probe costs microseconds and does
 * not queue behind the app's work when it is overloaded (SystemHttp's handler answers the same body elsewhere).
 * Until the app is served (migrations run, routes mounted), every other path answers 503 `unavailable` with
 * Retry-After as well: Bun's own answer before then is a bare 404, which an OTLP exporter takes as final and drops
 * its batch. Once served, `served` takes the catch-all away and requests go to the app.
 */
export const makeStartupRoutes = (build: ReturnType<typeof healthBuild>) => {
  let serving = false
  // Route handlers are the only place Bun hands its server out; the hand-off needs it to reload the routes.
  let server: Bun.Server<unknown> | undefined
  const health = {
    "/health": {
      GET: (_request: Request, from: Bun.Server<unknown>) => {
        server ??= from
        return serving ? Response.json(healthBody(build, Date.now())) : starting()
      }
    }
  }
  const handOff = (to: Bun.Server<unknown>) => to.reload({ routes: health } as Bun.ServeOptions)

  const routes = {
    ...health,
    "/*": (request: Request, from: Bun.Server<unknown>) => {
      server ??= from
      if (!serving) return starting()
      // Served, and the hand-off had no server to reload (no request had come in yet): this request does it.
      handOff(from)
      // A WebSocket cannot be upgraded through server.fetch: the client's retry reaches the app.
      return request.headers.get("upgrade") === null ? from.fetch(request) : starting()
    }
  }

  /** The app is served: /health answers 200 and the catch-all steps aside (learning the server from a probe of our own if none came in). */
  const served = Effect.gen(function*() {
    serving = true
    if (server === undefined) {
      const address = (yield* HttpServer.HttpServer).address
      if (address._tag === "TcpAddress") {
        const host = address.hostname === "0.0.0.0" ? "127.0.0.1" : address.hostname === "::" ? "[::1]" : address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname
        yield* Effect.promise(() => fetch(`http://${host}:${address.port}/health`).then((r) => r.arrayBuffer()).catch(() => undefined))
      }
    }
    if (server !== undefined) handOff(server)
  })

  return { routes, served } as const
}

const starting = () =>
  Response.json({ error: "starting", code: "unavailable", retryable: true }, { status: 503, headers: { "retry-after": "1" } })
