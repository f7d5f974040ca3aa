import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { required } from "../domain/Described.ts"

/**
 * The wire vocabulary: one class per contract `code`. Each is paired with a codec that writes exactly
 * `{ error, code, retryable }` with its status, so OpenAPI shows the true body.
 */
const wire = <Self extends { readonly message: string }, const Code extends string>(
  ErrorClass: new(args: { readonly message: string }) => Self,
  spec: { readonly status: number; readonly code: Code; readonly retryable: boolean; readonly description: string }
) =>
  Schema.transform(
    Schema.Struct({
      error: required(Schema.String, "What went wrong, in one sentence"),
      code: required(Schema.Literal(spec.code), "A stable code for programs to act on"),
      retryable: required(Schema.Boolean, "true: the same request may succeed later (after Retry-After when given)")
    }),
    Schema.declare((u): u is Self => u instanceof ErrorClass),
    {
      strict: true,
      decode: (body) => new ErrorClass({ message: body.error }),
      encode: (e) => ({ error: e.message, code: spec.code, retryable: spec.retryable })
    }
  ).annotations({
    ...HttpApiSchema.annotations({ status: spec.status }),
    identifier: `Error_${spec.code}`,
    description: spec.description
  })

export class ValidationFailed extends Schema.TaggedError<ValidationFailed>()("ValidationFailed", { message: Schema.String }) {}
export const ValidationFailedWire = wire(ValidationFailed, {
  status: 400, code: "validation_failed", retryable: false, description: "Malformed request or failed validation"
})

export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", { message: Schema.String }) {}
export const UnauthorizedWire = wire(Unauthorized, {
  status: 401, code: "unauthorized", retryable: false, description: "Authentication missing or invalid"
})

export class ReplayAllowanceExhausted
  extends Schema.TaggedError<ReplayAllowanceExhausted>()("ReplayAllowanceExhausted", { message: Schema.String })
{}
export const ReplayAllowanceExhaustedWire = wire(ReplayAllowanceExhausted, {
  status: 402, code: "replay_allowance_exhausted", retryable: false, description: "Monthly fork-replay allowance exhausted"
})

export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", { message: Schema.String }) {}
export const RequestTimeoutWire = wire(RequestTimeout, {
  status: 408, code: "request_timeout", retryable: true,
  description: "The request body did not arrive within the deadline or at the minimum rate"
})

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}
export const NotFoundWire = wire(NotFound, {
  status: 404, code: "not_found", retryable: false, description: "Missing, not visible or not owned"
})

export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", { message: Schema.String }) {}
export const ConflictWire = wire(Conflict, {
  status: 409, code: "conflict", retryable: false, description: "A record with this id already exists"
})

export class ReplayInProgress extends Schema.TaggedError<ReplayInProgress>()("ReplayInProgress", { message: Schema.String }) {}
export const ReplayInProgressWire = wire(ReplayInProgress, {
  status: 409, code: "replay_in_progress", retryable: true, description: "Another replay generation is already active"
})

export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", { message: Schema.String }) {}
export const RateLimitedWire = wire(RateLimited, {
  status: 429, code: "rate_limited", retryable: true, description: "Route rate limit exceeded; see Retry-After"
})

export class IngestBackpressure extends Schema.TaggedError<IngestBackpressure>()("IngestBackpressure", { message: Schema.String }) {}
export const IngestBackpressureWire = wire(IngestBackpressure, {
  status: 503, code: "ingest_backpressure", retryable: true, description: "Ingestion temporarily backpressured; retry after Retry-After"
})

export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", { message: Schema.String }) {}
export const UnavailableWire = wire(Unavailable, {
  status: 503, code: "unavailable", retryable: true, description: "The database cannot be reached; retry after Retry-After"
})

export class Internal extends Schema.TaggedError<Internal>()("Internal", { message: Schema.String }) {}
export const InternalWire = wire(Internal, {
  status: 500, code: "internal", retryable: true, description: "Unexpected server error"
})
