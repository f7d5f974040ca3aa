import { Effect } from "effect"
import type { DomainError } from "../domain/DomainError.ts"
import {
  type ApiError,
  Conflict,
  IngestBackpressure,
  internalError,
  NotFound,
  ReplayAllowanceExhausted,
  ReplayInProgress,
  Unauthorized,
  Unavailable,
  ValidationFailed
} from "./ApiErrors.ts"

/** Seconds an export refused by the ingestion gate is told to wait (its message and its Retry-After). */
export const INGEST_RETRY_AFTER_SECONDS = 1

/** A table for the errors `E`: one entry per tag, each taking the error of its tag. */
export type ErrorTableOf<E extends { readonly _tag: string }> = {
  readonly [Tag in E["_tag"]]: (e: Extract<E, { readonly _tag: Tag }>) => ApiError
}

/**
 * Every domain error's answer on the wire, for every transport (REST, batch, MCP): its API error (status, code,
 * retryable) and its message, written once. Keyed by tag and checked against DomainError, so a domain error
 * without an entry does not compile.
 */
export const errorTable = {
  TraceNotFound: (e) => new NotFound({ message: `trace ${e.traceId} not found` }),
  TraceIdTaken: (e) => new Conflict({ message: `trace ${e.traceId} already exists` }),
  TraceNotRunning: (e) =>
    new Conflict({ message: `trace ${e.traceId} is ${e.status}: spans can only be added to a running trace` }),
  SpansRejected: (e) => new ValidationFailed({ message: e.reason }),
  InvalidCursor: () => new ValidationFailed({ message: "cursor: not a cursor this service issued" }),
  SessionNotFound: (e) => new NotFound({ message: `session ${JSON.stringify(e.sessionId)} not found` }),

  ForkNotFound: (e) => new NotFound({ message: `fork ${e.forkId} not found` }),
  ForkPointNotInTrace: (e) =>
    new ValidationFailed({ message: `fork_point_span_id: ${e.spanId} is not a span of the trace` }),
  ReplayAlreadyActive: (e) => new ReplayInProgress({ message: `fork ${e.forkId} is already replaying` }),
  ReplayQuotaExceeded: (e) =>
    new ReplayAllowanceExhausted({
      message: `the monthly fork-replay allowance (${e.allowance}) is exhausted for ${e.month}`
    }),
  ReplayFailed: internalError,

  EvaluationNotFound: (e) => new NotFound({ message: `evaluation ${e.evaluationId} not found` }),
  EvaluationRunNotFound: (e) =>
    new NotFound({ message: `baseline run ${e.runId} is not a run of this evaluation by this account` }),
  NoOwnedTraces: () => new NotFound({ message: "none of trace_ids is a trace of this account" }),
  BaselineRunUnscored: (e) =>
    new ValidationFailed({ message: `baseline_run_ids: run ${e.runId} has no score (it is ${e.status})` }),
  EvalRuleNotFound: (e) => new NotFound({ message: `eval rule ${e.ruleId} not found` }),
  RuleEvaluationNotFound: (e) => new NotFound({ message: `evaluation ${e.evaluationId} not found` }),
  WebhookUrlRefused: (e) => new ValidationFailed({ message: `webhook_url: ${e.reason}` }),

  // Enforcement answers block instead (it fails closed): this never reaches a caller.
  PolicyStateUnavailable: internalError,
  GuardrailNotFound: (e) => new NotFound({ message: `guardrail ${e.id} not found` }),
  HoldNotFound: (e) => new NotFound({ message: `hold ${e.id} not found` }),
  HoldAlreadyDecided: (e) => new Conflict({ message: `hold ${e.id} is already ${e.status}` }),

  InvalidCredential: (e) => new Unauthorized({ message: e.reason }),
  CredentialRevoked: () => new Unauthorized({ message: "invalid or revoked API key" }),
  ApiKeysMisconfigured: internalError,

  IngestSaturated: (e) =>
    new IngestBackpressure({
      message:
        e.by === "checks"
          ? `ingestion is paused while enforcement checks are backed up on this instance; retry after ${INGEST_RETRY_AFTER_SECONDS} s`
          : `ingestion is saturated (${e.maxInflight} exports in flight); retry after ${INGEST_RETRY_AFTER_SECONDS} s`
    }),
  EmbedderUnavailable: (e) => new Unavailable({ message: `the search embedder is unavailable: ${e.reason}` }),
  EmbeddingRetryable: internalError,
  JobNotFound: (e) => new NotFound({ message: `job ${e.jobId} not found` }),
  JobFailed: internalError,
  LlmUnavailable: internalError,

  DataDirInUse: internalError
} satisfies ErrorTableOf<DomainError>

/** The API error a given domain error is answered with. */
export type WireError<E extends DomainError> = ReturnType<(typeof errorTable)[E["_tag"]]>

/** The API error of a domain error, per the table. */
export const toApiError = <E extends DomainError>(e: E): WireError<E> =>
  // A lookup by tag cannot be typed per tag; the table's own type checked every entry against its tag.
  (errorTable[e._tag] as (e: DomainError) => ApiError)(e) as WireError<E>

/** Whether a failure is one of the domain errors (by its tag: the API errors' tags are not among them). */
export const isDomainError = (u: unknown): u is DomainError =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && Object.hasOwn(errorTable, u._tag)

/**
 * A handler's domain failures turned into their API errors, per the table; its other failures (API errors it
 * raised itself) pass through.
 */
export const answerDomainErrors = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, DomainError> | WireError<Extract<E, DomainError>>, R> =>
  Effect.mapError(
    effect,
    (e) => (isDomainError(e) ? toApiError(e) : e) as Exclude<E, DomainError> | WireError<Extract<E, DomainError>>
  )
