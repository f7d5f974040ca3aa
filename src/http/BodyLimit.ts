import { HttpServerError, type HttpServerRequest } from "@effect/platform"
import { Chunk, Effect, Stream } from "effect"
import { ValidationFailed } from "../api/ApiErrors.ts"

/** The body is larger than TAPEDECK_MAX_BODY_BYTES. */
export class BodyTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(`request body exceeds the limit of ${maxBytes} bytes`)
  }
}

const readCapped = (request: HttpServerRequest.HttpServerRequest, maxBytes: number) =>
  request.stream.pipe(
    Stream.mapAccumEffect(0, (total, chunk: Uint8Array) => {
      const next = total + chunk.byteLength
      return next > maxBytes
        ? Effect.fail(new HttpServerError.RequestError({ request, reason: "Decode", cause: new BodyTooLarge(maxBytes) }))
        : Effect.succeed([next, chunk] as const)
    }),
    Stream.runCollect,
    Effect.map((chunks) => Buffer.concat(Chunk.toArray(chunks)))
  )

/**
 * Refuses a body over `maxBytes` before it is buffered whole: a declared Content-Length over the limit at
 * once; a body of unknown length (chunked) while it streams in, by counting bytes as they arrive.
 */
export const limitBody = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number
): Effect.Effect<HttpServerRequest.HttpServerRequest, ValidationFailed> => {
  const declared = request.headers["content-length"]
  if (declared !== undefined) {
    const length = Number(declared)
    return Number.isFinite(length) && length > maxBytes
      ? Effect.fail(new ValidationFailed({ message: new BodyTooLarge(maxBytes).message }))
      : Effect.succeed(request)
  }
  if (request.method === "GET" || request.method === "HEAD") return Effect.succeed(request)
  const bytes = Effect.runSync(Effect.cached(readCapped(request, maxBytes)))
  const text = Effect.map(bytes, (b) => b.toString("utf8"))
  const overrides: Record<PropertyKey, unknown> = {
    arrayBuffer: Effect.map(bytes, (b) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer),
    text,
    json: Effect.flatMap(text, (t) =>
      Effect.try({
        try: () => JSON.parse(t) as unknown,
        catch: (cause) => new HttpServerError.RequestError({ request, reason: "Decode", cause })
      })),
    stream: Stream.fromEffect(bytes).pipe(Stream.map((b) => new Uint8Array(b)))
  }
  return Effect.succeed(
    new Proxy(request, {
      get: (target, prop) => (prop in overrides ? overrides[prop] : Reflect.get(target, prop, target))
    })
  )
}
