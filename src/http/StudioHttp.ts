import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { NotFound, Unavailable } from "../api/ApiErrors.ts"
import { errorResponse } from "./ErrorBodies.ts"
import { loadOrBuildStudio, type StudioBundle } from "../ui/server/StudioBundle.ts"

/** Hashed names never change content: a browser may keep them for a year without asking again. */
const IMMUTABLE = "public, max-age=31536000, immutable"

const notFound = errorResponse(new NotFound({ message: "asset not found" }))
const unavailable = (message: string) => errorResponse(new Unavailable({ message }))

/** Whether the client takes gzip: listed, and not with `q=0`. */
const acceptsGzip = (request: HttpServerRequest.HttpServerRequest) =>
  (request.headers["accept-encoding"] ?? "").split(",").some((part) => {
    const [coding, ...params] = part.trim().split(";")
    return coding?.trim().toLowerCase() === "gzip" && !params.some((p) => /^\s*q\s*=\s*0(\.0*)?\s*$/.test(p))
  })

/**
 * Tapedeck Studio, beside the API on the same server: `/` redirects to `/ui`; `/ui/assets/<hashed name>` are the
 * bundle's files (public, cached for good, gzip when accepted); every other `/ui` path is the HTML shell, whose
 * router reads the URL, so deep links survive a reload. Nothing here reads data: the page calls the public API
 * with the user's key. The bundle is built (or reused, when its inputs have not changed) as the server starts.
 */
export const StudioHttpLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    // Built (or reused) once, started now and awaited by the first request that needs it; a failed build is
    // reported on every /ui request rather than taking the API down with it.
    const ready = yield* Effect.cached(
      Effect.tryPromise(() => loadOrBuildStudio()).pipe(
        Effect.tapError((error) => Effect.logError("Studio bundle failed", error.cause))
      )
    )
    yield* Effect.forkDaemon(Effect.ignore(ready))

    const withBundle = (respond: (bundle: StudioBundle) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>) =>
      ready.pipe(
        Effect.matchEffect({
          onFailure: () => Effect.succeed(unavailable("the Studio bundle could not be built; see the server log")),
          onSuccess: respond
        })
      )

    const shell = withBundle((studio) =>
      Effect.succeed(HttpServerResponse.text(studio.html, {
        contentType: "text/html; charset=utf-8",
        // The shell names the current hashed assets, so it is revalidated every time.
        headers: { "cache-control": "no-cache", "x-content-type-options": "nosniff" }
      }))
    )

    const asset = withBundle((studio) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        // Asset names are hashed ASCII, so the raw path names them: no decoding (a malformed escape is just unknown).
        const name = new URL(request.url, "http://localhost").pathname.slice("/ui/assets/".length)
        const file = studio.assets.get(name)
        if (file === undefined) return notFound
        const gzip = acceptsGzip(request)
        return HttpServerResponse.uint8Array(gzip ? file.gzip() : file.body, {
          contentType: file.contentType,
          headers: {
            "cache-control": IMMUTABLE,
            "x-content-type-options": "nosniff",
            vary: "accept-encoding",
            ...(gzip ? { "content-encoding": "gzip" } : {})
          }
        })
      })
    )

    yield* router.get("/", Effect.succeed(HttpServerResponse.redirect("/ui", { status: 302 })))
    yield* router.get("/ui/assets/*", asset)
    yield* router.get("/ui", shell)
    yield* router.get("/ui/*", shell)
  })
)
