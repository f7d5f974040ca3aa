import { HttpServerError, type HttpServerRequest, UrlParams } from "@effect/platform"
import { Chunk, Deferred, Effect, FiberId, Stream } from "effect"
import { currentUploadPermit } from "#layers/ingest/IngestGate"
import { MAX_BODY_DEPTH, nestsDeeperThan } from "#src/domain/JsonDepth"
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
        ? Effect.fail(
            new HttpServerError.RequestError({ request, reason: "Decode", cause: new BodyTooLarge(maxBytes) })
          )
        : Effect.succeed([next, chunk] as const)
    }),
    Stream.runCollect,
    Effect.map((chunks) => Buffer.concat(Chunk.toArray(chunks)))
  )

export { MAX_BODY_DEPTH, nestsDeeperThan } from "#src/domain/JsonDepth"

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

/** How fast a request body must arrive (TAPEDECK_BODY_DEADLINE_MS, _GRACE_MS, _MIN_BYTES_PER_SECOND). */
export interface BodyPace {
  readonly deadlineMs: number
  readonly graceMs: number
  /** 0: no rate check, only the deadline. */
  readonly minBytesPerSecond: number
}

/** The pace the configuration sets. */
export const bodyPaceOf = (config: {
  readonly bodyDeadlineMs: number
  readonly bodyGraceMs: number
  readonly bodyMinBytesPerSecond: number
}): BodyPace => ({
  deadlineMs: config.bodyDeadlineMs,
  graceMs: config.bodyGraceMs,
  minBytesPerSecond: config.bodyMinBytesPerSecond
})

/** The body did not arrive within the deadline, or fell behind the minimum rate: 408. */
export class BodyTimedOut extends Error {
  constructor(
    readonly received: number,
    readonly elapsedMs: number,
    readonly why: "deadline" | "rate",
    deadlineMs: number
  ) {
    super(
      why === "deadline"
        ? `the request body did not arrive within ${deadlineMs / 1000} s (${received} bytes received)`
        : `the request body arrived too slowly (${received} bytes in ${(elapsedMs / 1000).toFixed(1)} s)`
    )
  }
}

/** The upload's ingestion permit went to another account under its fair share (IngestGate): 503, retry. */
export class BodyPreempted extends Error {
  constructor() {
    super("ingestion is saturated and this account holds more than its fair share of uploads; retry shortly")
  }
}

/**
 * When the next byte must have arrived, counted from `startedAt`: by the deadline, and after the grace period
 * at the minimum average rate (`received` bytes so far are enough until grace + received / rate).
 */
export const bodyDueAt = (pace: BodyPace, startedAt: number, received: number) =>
  startedAt +
  (pace.minBytesPerSecond > 0
    ? Math.min(pace.deadlineMs, pace.graceMs + (received * 1000) / pace.minBytesPerSecond)
    : pace.deadlineMs)

const requestError = (request: HttpServerRequest.HttpServerRequest, cause: unknown) =>
  new HttpServerError.RequestError({ request, reason: "Decode", cause })

/**
 * Reads the whole body under the size cap and the pace, straight from the web stream so that a stalled client
 * is noticed on a timer rather than on its next byte. When the request holds an ingestion permit, reports the
 * body's arrival to it, and stops at once if the permit is taken back.
 */
const readPaced = (
  request: HttpServerRequest.HttpServerRequest,
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  pace: BodyPace,
  startedAt: number
) =>
  Effect.flatMap(currentUploadPermit, (permit) =>
    Effect.async<Uint8Array, HttpServerError.RequestError>((resume) => {
      const reader = body.getReader()
      const chunks: Array<Uint8Array> = []
      let received = 0
      let settled = false
      let timer: ReturnType<typeof setTimeout> | undefined
      let stopListening = () => {}
      const settle = (outcome: Effect.Effect<Uint8Array, HttpServerError.RequestError>) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        stopListening()
        resume(outcome)
      }
      const fail = (cause: unknown) => {
        reader.cancel().catch(() => {})
        settle(Effect.fail(requestError(request, cause)))
      }
      const arm = () => {
        clearTimeout(timer)
        const due = bodyDueAt(pace, startedAt, received)
        const why = due >= startedAt + pace.deadlineMs ? "deadline" : "rate"
        timer = setTimeout(
          () => fail(new BodyTimedOut(received, performance.now() - startedAt, why, pace.deadlineMs)),
          Math.max(0, due - performance.now())
        )
      }
      const pump = (): void => {
        reader.read().then(
          ({ done, value }) => {
            if (settled) return
            if (done) {
              permit?.uploaded()
              return settle(Effect.succeed(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
            }
            received += value.byteLength
            if (received > maxBytes) return fail(new BodyTooLarge(maxBytes))
            chunks.push(value)
            arm()
            pump()
          },
          (cause) => fail(cause)
        )
      }
      if (permit !== undefined) stopListening = permit.onPreempt(() => fail(new BodyPreempted()))
      if (settled) return
      arm()
      pump()
      return Effect.sync(() => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        stopListening()
        reader.cancel().catch(() => {})
      })
    })
  )

/**
 * Refuses a body over `maxBytes` before it is buffered whole: a declared Content-Length over the limit at
 * once; a body of unknown length (chunked) while it streams in, by counting bytes as they arrive. With a pace,
 * the body must also arrive in time (`BodyTimedOut`), the clock starting now. A JSON body is also refused when
 * it nests deeper than MAX_BODY_DEPTH.
 */
export const limitBody = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number,
  pace?: BodyPace
): Effect.Effect<HttpServerRequest.HttpServerRequest, ValidationFailed> => {
  const startedAt = performance.now()
  const declared = request.headers["content-length"]
  let overrides: Record<PropertyKey, unknown>
  const bodiless = declared === undefined && request.headers["transfer-encoding"] === undefined
  if (declared !== undefined) {
    const length = Number(declared)
    if (Number.isFinite(length) && length > maxBytes) {
      return Effect.fail(new ValidationFailed({ message: new BodyTooLarge(maxBytes).message }))
    }
  }
  const source = (request.source as { readonly body?: unknown } | undefined)?.body
  if (bodiless || request.method === "GET" || request.method === "HEAD") {
    overrides = { json: Effect.flatMap(request.text, (t) => parseJson(request, t)) }
  } else if (pace !== undefined && source instanceof ReadableStream) {
    overrides = readOverrides(request, readPaced(request, source, maxBytes, pace, startedAt))
  } else if (declared !== undefined) {
    overrides = { json: Effect.flatMap(request.text, (t) => parseJson(request, t)) }
  } else {
    overrides = readOverrides(request, readCapped(request, maxBytes))
  }
  return Effect.succeed(
    new Proxy(request, {
      get: (target, prop) => (prop in overrides ? overrides[prop] : Reflect.get(target, prop, target))
    })
  )
}

const utf8 = new TextDecoder()

/**
 * `read` run at most once: the first caller runs it, every later one gets its outcome (waiting for it if it is still
 * running). As `Effect.cached`, without running a fiber per request to build the cache.
 */
const once = <A, E>(read: Effect.Effect<A, E>): Effect.Effect<A, E> => {
  let outcome: Deferred.Deferred<A, E> | undefined
  return Effect.suspend(() => {
    if (outcome !== undefined) return Deferred.await(outcome)
    const deferred = Deferred.unsafeMake<A, E>(FiberId.none)
    outcome = deferred
    return Effect.zipRight(Effect.intoDeferred(read, deferred), Deferred.await(deferred))
  })
}

/** Every way of reading the body, answered from one read of it. */
const readOverrides = (
  request: HttpServerRequest.HttpServerRequest,
  read: Effect.Effect<Uint8Array, HttpServerError.RequestError>
): Record<PropertyKey, unknown> => {
  const bytes = once(read)
  // A non-fatal decoder replaces invalid UTF-8 instead of throwing.
  const text = Effect.map(bytes, (b) => utf8.decode(b))
  return {
    arrayBuffer: Effect.map(bytes, (b) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer),
    text,
    json: Effect.flatMap(text, (t) => parseJson(request, t)),
    urlParamsBody: Effect.map(text, (t) => UrlParams.fromInput(new URLSearchParams(t))),
    stream: Stream.fromEffect(bytes)
  }
}
