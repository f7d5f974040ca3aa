import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { required } from "../domain/Described.ts"

/**
 * The wire vocabulary: one class per contract `code`. Each is paired with a codec that writes exactly
 * `{ error, code, retryable }` with its status, so OpenAPI shows the true body.
 */
export class ValidationFailed extends Schema.TaggedError<ValidationFailed>()("ValidationFailed", {
  message: Schema.String
}) {}
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", { message: Schema.String }) {}
export class ReplayAllowanceExhausted extends Schema.TaggedError<ReplayAllowanceExhausted>()(
  "ReplayAllowanceExhausted",
  { message: Schema.String }
) {}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", {
  message: Schema.String
}) {}
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", {
  message: Schema.String
}) {}
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", { message: Schema.String }) {}
export class ReplayInProgress extends Schema.TaggedError<ReplayInProgress>()("ReplayInProgress", {
  message: Schema.String
}) {}
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", { message: Schema.String }) {}
export class IngestBackpressure extends Schema.TaggedError<IngestBackpressure>()("IngestBackpressure", {
  message: Schema.String
}) {}
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", { message: Schema.String }) {}
export class Internal extends Schema.TaggedError<Internal>()("Internal", { message: Schema.String }) {}
export class OtlpSignalNotSupported extends Schema.TaggedError<OtlpSignalNotSupported>()("OtlpSignalNotSupported", {
  message: Schema.String
}) {}

/** Any error the API answers with. */
export type ApiError =
  | ValidationFailed
  | Unauthorized
  | ReplayAllowanceExhausted
  | NotFound
  | MethodNotAllowed
  | RequestTimeout
  | Conflict
  | ReplayInProgress
  | RateLimited
  | IngestBackpressure
  | Unavailable
  | Internal
  | OtlpSignalNotSupported

interface WireSpec {
  readonly status: number
  readonly code: string
  readonly retryable: boolean
  readonly description: string
}

/** Status, code and retryable flag of every API error: the only place they are written. */
export const wireSpecs = {
  ValidationFailed: {
    status: 400,
    code: "validation_failed",
    retryable: false,
    description: "Malformed request or failed validation"
  },
  Unauthorized: {
    status: 401,
    code: "unauthorized",
    retryable: false,
    description: "Authentication missing or invalid"
  },
  ReplayAllowanceExhausted: {
    status: 402,
    code: "replay_allowance_exhausted",
    retryable: false,
    description: "Monthly fork-replay allowance exhausted"
  },
  NotFound: { status: 404, code: "not_found", retryable: false, description: "Missing, not visible or not owned" },
  MethodNotAllowed: {
    status: 405,
    code: "method_not_allowed",
    retryable: false,
    description: "The route does not take this method"
  },
  RequestTimeout: {
    status: 408,
    code: "request_timeout",
    retryable: true,
    description: "The request body did not arrive within the deadline or at the minimum rate"
  },
  Conflict: { status: 409, code: "conflict", retryable: false, description: "A record with this id already exists" },
  ReplayInProgress: {
    status: 409,
    code: "replay_in_progress",
    retryable: true,
    description: "Another replay generation is already active"
  },
  RateLimited: {
    status: 429,
    code: "rate_limited",
    retryable: true,
    description: "Route rate limit exceeded; see Retry-After"
  },
  IngestBackpressure: {
    status: 503,
    code: "ingest_backpressure",
    retryable: true,
    description: "Ingestion temporarily backpressured; retry after Retry-After"
  },
  Unavailable: {
    status: 503,
    code: "unavailable",
    retryable: true,
    description: "The database cannot be reached; retry after Retry-After"
  },
  Internal: { status: 500, code: "internal", retryable: true, description: "Unexpected server error" },
  OtlpSignalNotSupported: {
    status: 404,
    code: "otlp_signal_not_supported",
    retryable: false,
    description: "OTLP logs and metrics are not received"
  }
} as const satisfies { readonly [Tag in ApiError["_tag"]]: WireSpec }

/** The status an API error is answered with. */
export const statusOf = (e: ApiError): number => wireSpecs[e._tag].status

/** The contract's error body, `{ error, code, retryable }`: the one encoder every transport uses. */
export const errorBody = (e: ApiError) => ({
  error: e.message,
  code: wireSpecs[e._tag].code,
  retryable: wireSpecs[e._tag].retryable
})

/** The codec HttpApi endpoints declare: the body above with its status, so OpenAPI shows the true body. */
const wire = <Self extends ApiError>(
  ErrorClass: new (args: { readonly message: string }) => Self,
  tag: Self["_tag"]
) => {
  const spec = wireSpecs[tag]
  return Schema.transform(
    Schema.Struct({
      error: required(Schema.String, "What went wrong, in one sentence"),
      code: required(Schema.Literal(spec.code), "A stable code for programs to act on"),
      retryable: required(Schema.Boolean, "true: the same request may succeed later (after Retry-After when given)")
    }),
    Schema.declare((u): u is Self => u instanceof ErrorClass),
    {
      strict: true,
      decode: (body) => new ErrorClass({ message: body.error }),
      encode: (e) => ({ ...errorBody(e), code: spec.code })
    }
  ).annotations({
    ...HttpApiSchema.annotations({ status: spec.status }),
    identifier: `Error_${spec.code}`,
    description: spec.description
  })
}

export const ValidationFailedWire = wire(ValidationFailed, "ValidationFailed")
export const UnauthorizedWire = wire(Unauthorized, "Unauthorized")
export const ReplayAllowanceExhaustedWire = wire(ReplayAllowanceExhausted, "ReplayAllowanceExhausted")
export const RequestTimeoutWire = wire(RequestTimeout, "RequestTimeout")
export const NotFoundWire = wire(NotFound, "NotFound")
export const ConflictWire = wire(Conflict, "Conflict")
export const ReplayInProgressWire = wire(ReplayInProgress, "ReplayInProgress")
export const RateLimitedWire = wire(RateLimited, "RateLimited")
export const IngestBackpressureWire = wire(IngestBackpressure, "IngestBackpressure")
export const UnavailableWire = wire(Unavailable, "Unavailable")
export const InternalWire = wire(Internal, "Internal")

/** The answer to a failure that is not the caller's: the body says nothing of it (the log does). */
export const internalError = () => new Internal({ message: "internal error" })

/** The answer to a request with no credential, or one that names no account. */
export const missingCredentials = () => new Unauthorized({ message: "missing or invalid credentials" })

/** The answer past a route's rate limit. */
export const rateLimited = (retryAfterSeconds: number) =>
  new RateLimited({ message: `rate limit exceeded; retry after ${retryAfterSeconds} s` })
