import { HttpServerError, type HttpServerRequest, UrlParams } from "@effect/platform"
import { Chunk, Deferred, Effect, FiberId, Stream } from "effect"
import { currentUploadPermit, type UploadPermit } from "#layers/ingest/IngestGate"
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

/** `parseJson` of the body's bytes, as its outcome (no effects run to get it). */
const parsedJson = (request: HttpServerRequest.HttpServerRequest, bytes: Uint8Array) => {
  let value: unknown
  try {
    value = JSON.parse(utf8.decode(bytes))
  } catch (cause) {
    return Effect.fail(new HttpServerError.RequestError({ request, reason: "Decode", cause }))
  }
  return nestsDeeperThan(value, MAX_BODY_DEPTH)
    ? Effect.fail(new HttpServerError.RequestError({ request, reason: "Decode", cause: new BodyTooDeep() }))
    : Effect.succeed(value)
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
    /** The bytes received by then; undefined for a body read whole (`readWhole`), whose progress is not seen. */
    readonly received: number | undefined,
    readonly elapsedMs: number,
    readonly why: "deadline" | "rate",
    deadlineMs: number
  ) {
    const seconds = (elapsedMs / 1000).toFixed(1)
    super(
      why === "deadline"
        ? `the request body did not arrive within ${deadlineMs / 1000} s${received === undefined ? "" : ` (${received} bytes received)`}`
        : received === undefined
          ? `the request body arrived too slowly (not whole after ${seconds} s)`
          : `the request body arrived too slowly (${received} bytes in ${seconds} s)`
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
) => Effect.flatMap(currentUploadPermit, (permit) => readPacedWith(request, body, maxBytes, pace, startedAt, permit))

/**
 * As `readPaced`, with the request's ingestion permit (if any) given, and the body turned into `A` by `finish`. A body
 * of a small declared length and no permit is read whole (`readWhole`), any other from its stream (`readStreamed`).
 */
const readPacedWith = <A = Uint8Array>(
  request: HttpServerRequest.HttpServerRequest,
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  pace: BodyPace,
  startedAt: number,
  permit: UploadPermit | undefined,
  finish: (bytes: Uint8Array) => Effect.Effect<A, HttpServerError.RequestError> = Effect.succeed as never
) => {
  const source = request.source as { readonly arrayBuffer?: unknown }
  const length = Number(request.headers["content-length"])
  return permit === undefined && length <= WHOLE_READ_BYTES && typeof source.arrayBuffer === "function"
    ? readWhole(request, source as Request, length, pace, startedAt, finish)
    : readStreamed(request, body, maxBytes, pace, startedAt, permit, finish)
}

/**
 * A timer for when the body is late: due once `received` bytes are in (`bodyDueAt`), answered with the BodyTimedOut
 * that says so (`shown`: the bytes it reports received).
 */
const lateTimer = (
  pace: BodyPace,
  startedAt: number,
  received: number,
  shown: number | undefined,
  onLate: (late: BodyTimedOut) => void
) => {
  const due = bodyDueAt(pace, startedAt, received)
  const why = due >= startedAt + pace.deadlineMs ? "deadline" : "rate"
  return setTimeout(
    () => onLate(new BodyTimedOut(shown, performance.now() - startedAt, why, pace.deadlineMs)),
    Math.max(0, due - performance.now())
  )
}

/**
 * Bodies of at most this many declared bytes are read whole. Reading a web stream chunk by chunk cost Bun about one
 * young-generation garbage collection every 25 requests, reading the same body whole none (docs/performance.md,
 * "Enforcement"), and each collection pauses every request in flight. At the default pace the last byte of such a body
 * is due a quarter of a second after the grace period: there is little progress to watch in between.
 */
const WHOLE_READ_BYTES = 4096

/**
 * The body read whole by the runtime, the request failed with BodyTimedOut if it is not whole when its last byte is
 * due (`bodyDueAt` of its declared length). Bun holds a body to its declared length, so the size cap is the caller's
 * check of that length.
 */
const readWhole = <A>(
  request: HttpServerRequest.HttpServerRequest,
  source: Request,
  length: number,
  pace: BodyPace,
  startedAt: number,
  finish: (bytes: Uint8Array) => Effect.Effect<A, HttpServerError.RequestError>
) =>
  Effect.async<A, HttpServerError.RequestError>((resume) => {
    let settled = false
    const settle = (outcome: Effect.Effect<A, HttpServerError.RequestError>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resume(outcome)
    }
    const timer = lateTimer(pace, startedAt, Math.max(0, length - 1), undefined, (late) =>
      settle(Effect.fail(requestError(request, late)))
    )
    try {
      source.arrayBuffer().then(
        (bytes) => settle(finish(new Uint8Array(bytes))),
        (cause) => settle(Effect.fail(requestError(request, cause)))
      )
    } catch (cause) {
      settle(Effect.fail(requestError(request, cause)))
    }
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
    })
  })

/** The body read chunk by chunk from its stream, its pace checked as each chunk arrives. */
const readStreamed = <A>(
  request: HttpServerRequest.HttpServerRequest,
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  pace: BodyPace,
  startedAt: number,
  permit: UploadPermit | undefined,
  finish: (bytes: Uint8Array) => Effect.Effect<A, HttpServerError.RequestError>
) =>
  Effect.async<A, HttpServerError.RequestError>((resume) => {
    const reader = body.getReader()
    const chunks: Array<Uint8Array> = []
    let received = 0
    let settled = false
    let timer: ReturnType<typeof setTimeout> | undefined
    let stopListening = () => {}
    const settle = (outcome: Effect.Effect<A, HttpServerError.RequestError>) => {
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
      timer = lateTimer(pace, startedAt, received, received, fail)
    }
    const pump = (): void => {
      reader.read().then(
        ({ done, value }) => {
          if (settled) return
          if (done) {
            permit?.uploaded()
            return settle(finish(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
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

/**
 * The JSON body of a request that `limitBody` would read paced from its web stream (a declared length, `pace` given),
 * read and parsed in one step, for a route that reads its body once (the enforcement check's lean route): no wrapped
 * request, no shared read, the text decoded and parsed once the body is whole. A declared length over `maxBytes` is
 * refused here and now (as `limitBody` refuses it); the read fails as `limitBody`'s `json` does. Undefined when
 * `limitBody` would read the body another way (`limitBody` then). The clock of the pace starts now.
 */
export const pacedJsonBody = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number,
  pace: BodyPace,
  permit: UploadPermit | undefined
): Effect.Effect<unknown, HttpServerError.RequestError> | ValidationFailed | undefined => {
  const startedAt = performance.now()
  const declared = request.headers["content-length"]
  if (declared === undefined || request.method === "GET" || request.method === "HEAD") return undefined
  const length = Number(declared)
  if (Number.isFinite(length) && length > maxBytes)
    return new ValidationFailed({ message: new BodyTooLarge(maxBytes).message })
  const source = (request.source as { readonly body?: unknown } | undefined)?.body
  if (!(source instanceof ReadableStream)) return undefined
  return readPacedWith(request, source, maxBytes, pace, startedAt, permit, (bytes) => parsedJson(request, bytes))
}

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
