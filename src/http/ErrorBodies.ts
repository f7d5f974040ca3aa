import {
  HttpApiBuilder,
  HttpApiError,
  HttpApp,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse,
  Multipart
} from "@effect/platform"
import { SqlError } from "@effect/sql"
import { Cause, Effect, Option } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import {
  type ApiError,
  errorBody,
  IngestBackpressure,
  type Internal,
  internalError,
  NotFound,
  RequestTimeout,
  statusOf,
  Unavailable,
  ValidationFailed
} from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { isExportPath } from "../api/OtlpApi.ts"
import { OTLP_OTHER_SIGNAL_PATHS } from "./OtlpOtherSignals.ts"
import {
  type BodyPace,
  BodyPreempted,
  bodyPaceOf,
  BodyTimedOut,
  BodyTooDeep,
  BodyTooLarge,
  limitBody
} from "./BodyLimit.ts"
import { setRetryAfter } from "./RateLimitLive.ts"

/** The API errors the framework's own failures are rewritten to. */
export type RewrittenError = ValidationFailed | NotFound | Unavailable | Internal | RequestTimeout | IngestBackpressure

type Rewritten = Effect.Effect<never, RewrittenError>

const MAX_MESSAGE = 1000

/**
 * An API error as a response outside the HttpApi router (WebSocket upgrades, MCP, Studio, OTLP refusals): the
 * contract's body with the error's status.
 */
export const errorResponse = (e: ApiError, headers: Readonly<Record<string, string>> = {}) =>
  HttpServerResponse.unsafeJson(errorBody(e), { status: statusOf(e), headers })

const describeIssues = (e: HttpApiError.HttpApiDecodeError) => {
  // Optional fields add an "Expected undefined" branch to every issue; it says nothing to the caller.
  const detail = e.issues
    .filter((i) => !i.message.startsWith("Expected undefined"))
    .slice(0, 5)
    .map((i) => {
      const message = i.message.length > 300 ? `${i.message.slice(0, 300)}…` : i.message
      return `${i.path.map(String).join(".") || "(body)"}: ${message}`
    })
    .join("; ")
  return (detail || e.message).slice(0, MAX_MESSAGE)
}

/**
 * Every route but the OTLP exports (and the OTLP paths refused whatever their body) takes JSON: any other declared body type is refused before it is read
 * (the framework would otherwise buffer form and multipart bodies without our size cap).
 */
export const requireJson = (request: HttpServerRequest.HttpServerRequest) => {
  const contentType = request.headers["content-type"]
  const path = request.url.split("?")[0]!
  if (contentType === undefined || isExportPath(path) || Object.hasOwn(OTLP_OTHER_SIGNAL_PATHS, path))
    return Effect.void
  const mediaType = contentType.split(";")[0]!.trim().toLowerCase()
  return mediaType === "application/json" || mediaType === ""
    ? Effect.void
    : Effect.fail(new ValidationFailed({ message: "Content-Type must be application/json" }))
}

/** The longest path parameter the router takes (HttpRouter's maxParamLength, set in AppLive). */
export const MAX_PATH_PARAM_LENGTH = 2048

/**
 * Why the path cannot name any resource, if it cannot: a segment longer than a path parameter may be, or one
 * that is not valid percent-encoding. The router finds no route for such a path; it is a malformed request (400),
 * not a missing route.
 */
const malformedSegment = (url: string): string | undefined => {
  const q = url.indexOf("?")
  for (const segment of (q < 0 ? url : url.slice(0, q)).split("/")) {
    if (segment.length > MAX_PATH_PARAM_LENGTH) {
      return `a path segment is longer than ${MAX_PATH_PARAM_LENGTH} characters`
    }
    if (segment.includes("%")) {
      try {
        decodeURIComponent(segment)
      } catch {
        return "a path segment is not valid percent-encoding"
      }
    }
  }
  return undefined
}

const rewriteFailure = (e: unknown): Option.Option<Rewritten> => {
  if (e instanceof HttpApiError.HttpApiDecodeError) {
    return Option.some(Effect.fail(new ValidationFailed({ message: describeIssues(e) })))
  }
  if (HttpServerError.isServerError(e) && e._tag === "RouteNotFound") {
    const malformed = malformedSegment(e.request.url)
    return Option.some(
      Effect.fail(
        malformed === undefined
          ? new NotFound({ message: "route not found" })
          : new ValidationFailed({ message: malformed })
      )
    )
  }
  return Option.none()
}

/** The SQLSTATE of a statement error, as node-postgres and PGlite both report it in `code`; undefined otherwise. */
const sqlState = (e: SqlError.SqlError) => {
  const code = (e.cause as { code?: unknown } | undefined)?.code
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined
}

/** SQLSTATE class 22 (data exception). */
const isDataException = (e: SqlError.SqlError) => sqlState(e)?.startsWith("22") === true

/**
 * The database is away or shedding load, so retrying may succeed: no SQLSTATE (the connection failed or timed
 * out), class 08 (connection exception), 40 (serialization failure, deadlock), 53 (insufficient resources),
 * 57 (operator intervention: shutdown, statement timeout). Anything else is a bug of ours, not an outage.
 */
export const isTransient = (e: SqlError.SqlError) => {
  const state = sqlState(e)
  return state === undefined || ["08", "40", "53", "57"].includes(state.slice(0, 2))
}

/**
 * A body too slow to arrive: 408, and the connection is closed after the answer (the rest of the body is not
 * worth waiting for, and the client may not be reading what it sends).
 */
export const bodyTimedOut = (e: BodyTimedOut) =>
  HttpApp.appendPreResponseHandler((_request, response) =>
    Effect.succeed(HttpServerResponse.setHeader(response, "connection", "close"))
  ).pipe(Effect.zipRight(Effect.fail(new RequestTimeout({ message: e.message }))))

/** An upload whose ingestion permit went to another account (IngestGate): 503, retry shortly. */
export const bodyPreempted = (e: BodyPreempted) =>
  setRetryAfter(1).pipe(Effect.zipRight(Effect.fail(new IngestBackpressure({ message: e.message }))))

const rewriteDefect = (defect: unknown): Rewritten => {
  // A body that is not JSON (or is too large) reaches us as a defect of the framework, not as a decode error.
  if (defect instanceof Multipart.MultipartError) {
    return Effect.fail(new ValidationFailed({ message: "Content-Type must be application/json" }))
  }
  if (HttpServerError.isServerError(defect) && defect._tag === "RequestError" && defect.cause instanceof BodyTimedOut) {
    return bodyTimedOut(defect.cause)
  }
  if (
    HttpServerError.isServerError(defect) &&
    defect._tag === "RequestError" &&
    defect.cause instanceof BodyPreempted
  ) {
    return bodyPreempted(defect.cause)
  }
  if (HttpServerError.isServerError(defect) && defect._tag === "RequestError") {
    return Effect.fail(
      new ValidationFailed({
        message:
          defect.cause instanceof BodyTooLarge || defect.cause instanceof BodyTooDeep
            ? defect.cause.message
            : "request body is not valid JSON"
      })
    )
  }
  // A value PostgreSQL refuses to store or compare (SQLSTATE class 22, "data exception": a NUL character in a
  // string, an unpaired surrogate, an out-of-range number) came from the request: a 400, not an outage.
  if (defect instanceof SqlError.SqlError && isDataException(defect)) {
    return Effect.logInfo("request refused by the database as invalid data", Cause.die(defect)).pipe(
      Effect.zipRight(
        Effect.fail(
          new ValidationFailed({
            message:
              "the request contains a value that cannot be stored (for example a NUL character or an unpaired surrogate)"
          })
        )
      )
    )
  }
  // The database is out of reach: a retryable 503, not a bug (enforcement checks answer block instead).
  if (defect instanceof SqlError.SqlError && isTransient(defect)) {
    return Effect.logWarning("database unavailable", Cause.die(defect)).pipe(
      Effect.zipRight(setRetryAfter(1)),
      Effect.zipRight(Effect.fail(new Unavailable({ message: "the database cannot be reached; retry shortly" })))
    )
  }
  return Effect.logError("unhandled defect", Cause.die(defect)).pipe(Effect.zipRight(Effect.fail(internalError())))
}

/**
 * The request's JSON content type checked and its body capped and paced, and every failure the framework (or `app`)
 * raises on its own rewritten as an API error: what every API request passes, the HttpApi router's (ErrorBodiesLive
 * below) and the enforcement check's lean route's (EnforcementCheckRoute) alike.
 */
export const withErrorBodies =
  (maxBodyBytes: number, pace: BodyPace) =>
  <E, R>(
    app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ): Effect.Effect<
    HttpServerResponse.HttpServerResponse,
    Exclude<E, HttpApiError.HttpApiDecodeError> | RewrittenError,
    R | HttpServerRequest.HttpServerRequest
  > =>
    // Every request passes here: plain combinators, not a generator.
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Effect.zipRight(
        requireJson(request),
        Effect.flatMap(limitBody(request, maxBodyBytes, pace), (limited) =>
          Effect.provideService(app, HttpServerRequest.HttpServerRequest, limited)
        )
      )
    ).pipe(rewriteErrors)

/**
 * Every failure the framework (or `app`) raises on its own rewritten as an API error, as `withErrorBodies` does: for a
 * route that checks the content type and reads its body itself (the enforcement check's lean route).
 */
export const rewriteErrors = <A, E, R>(
  app: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, HttpApiError.HttpApiDecodeError> | RewrittenError, R> =>
  app.pipe(
    Effect.catchSome(rewriteFailure),
    Effect.catchAllDefect(rewriteDefect)
    // rewriteFailure rewrites every decode error; catchSome cannot say so in its type.
  ) as Effect.Effect<A, Exclude<E, HttpApiError.HttpApiDecodeError> | RewrittenError, R>

/** Every failure the framework raises on its own becomes the contract's `{error, code, retryable}` body. */
export const ErrorBodiesLive = HttpApiBuilder.middleware(
  TapedeckApi,
  Effect.map(AppConfig, (config) => {
    const guard = withErrorBodies(config.maxBodyBytes, bodyPaceOf(config))
    return (app: HttpApp.Default): HttpApp.Default<RewrittenError> => guard(app)
  })
)
