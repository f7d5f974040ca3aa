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

/** How deeply a request body may nest; deeper ones would overflow the stack of whatever walks them next. */
export const MAX_BODY_DEPTH = 100

/**
 * Whether `value` nests deeper than `max` arrays and objects. Recursive, but never more than `max` calls deep
 * whatever the input, and without allocating: every JSON body passes through here.
 */
export const nestsDeeperThan = (value: unknown, max: number, depth = 0): boolean => {
  if (value === null || typeof value !== "object") return false
  if (depth >= max) return true
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (nestsDeeperThan(value[i], max, depth + 1)) return true
    return false
  }
  for (const key in value) if (nestsDeeperThan((value as Record<string, unknown>)[key], max, depth + 1)) return true
  return false
}

const parseJson = (request: HttpServerRequest.HttpServerRequest, text: string) =>
  Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: (cause) => new HttpServerError.RequestError({ request, reason: "Decode", cause })
  }).pipe(
    Effect.filterOrFail(
      (value) => !nestsDeeperThan(value, MAX_BODY_DEPTH),
      () => new HttpServerError.RequestError({ request, reason: "Decode", cause: new BodyTooDeep() })
    )
  )

/** The body nests deeper than MAX_BODY_DEPTH. */
export class BodyTooDeep extends Error {
  constructor() {
    super(`request body nests deeper than ${MAX_BODY_DEPTH} levels`)
  }
}

/**
 * Refuses a body over `maxBytes` before it is buffered whole: a declared Content-Length over the limit at
 * once; a body of unknown length (chunked) while it streams in, by counting bytes as they arrive. A JSON
 * body is also refused when it nests deeper than MAX_BODY_DEPTH.
 */
export const limitBody = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number
): Effect.Effect<HttpServerRequest.HttpServerRequest, ValidationFailed> => {
  const declared = request.headers["content-length"]
  let overrides: Record<PropertyKey, unknown>
  const bodiless = declared === undefined && request.headers["transfer-encoding"] === undefined
  if (declared !== undefined || bodiless || request.method === "GET" || request.method === "HEAD") {
    const length = Number(declared ?? 0)
    if (Number.isFinite(length) && length > maxBytes) {
      return Effect.fail(new ValidationFailed({ message: new BodyTooLarge(maxBytes).message }))
    }
    overrides = { json: Effect.flatMap(request.text, (t) => parseJson(request, t)) }
  } else {
    const bytes = Effect.runSync(Effect.cached(readCapped(request, maxBytes)))
    const text = Effect.map(bytes, (b) => b.toString("utf8"))
    overrides = {
      arrayBuffer: Effect.map(bytes, (b) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer),
      text,
      json: Effect.flatMap(text, (t) => parseJson(request, t)),
      stream: Stream.fromEffect(bytes).pipe(Stream.map((b) => new Uint8Array(b)))
    }
  }
  return Effect.succeed(
    new Proxy(request, {
      get: (target, prop) => (prop in overrides ? overrides[prop] : Reflect.get(target, prop, target))
    })
  )
}
