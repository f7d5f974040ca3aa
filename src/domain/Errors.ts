import { Schema } from "effect"
import { EvaluationId, EvaluationRunId, RunStatus } from "./Evaluation.ts"
import { ForkId, JobId, SpanId, TraceId } from "./Ids.ts"
import { TraceStatus } from "./Trace.ts"

/**
 * Every domain error: the failures services raise, each precise enough to say what went wrong. This module
 * exports nothing else, so its exports are the union `DomainError` (DomainError.ts), and the wire table
 * (src/api/ErrorTable.ts) must give each one its answer before the code compiles.
 */

// Traces, spans and sessions

export class TraceNotFound extends Schema.TaggedError<TraceNotFound>()("TraceNotFound", { traceId: TraceId }) {}

export class TraceIdTaken extends Schema.TaggedError<TraceIdTaken>()("TraceIdTaken", { traceId: TraceId }) {}

/** Spans are only added to a running trace: a finished one has already been handed to downstream processing. */
export class TraceNotRunning extends Schema.TaggedError<TraceNotRunning>()("TraceNotRunning", {
  traceId: TraceId,
  status: TraceStatus
}) {}

/** A batch of spans the trace cannot take (duplicate ids, dangling parents, unstorable values). */
export class SpansRejected extends Schema.TaggedError<SpansRejected>()("SpansRejected", { reason: Schema.String }) {}

/** The `cursor` of a listing is not one this service issued. */
export class InvalidCursor extends Schema.TaggedError<InvalidCursor>()("InvalidCursor", {}) {}

/** No trace of the account (not deleted) carries this session id. */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  sessionId: Schema.String
}) {}

// Forks and replay

export class ForkNotFound extends Schema.TaggedError<ForkNotFound>()("ForkNotFound", { forkId: ForkId }) {}

/** The fork point is not a span of the source trace. */
export class ForkPointNotInTrace extends Schema.TaggedError<ForkPointNotInTrace>()("ForkPointNotInTrace", {
  spanId: SpanId
}) {}

export class ReplayAlreadyActive extends Schema.TaggedError<ReplayAlreadyActive>()("ReplayAlreadyActive", {
  forkId: ForkId
}) {}

export class ReplayQuotaExceeded extends Schema.TaggedError<ReplayQuotaExceeded>()("ReplayQuotaExceeded", {
  allowance: Schema.Number,
  month: Schema.String
}) {}

/** The replay could not be carried out; `modelWork`: whether any model call succeeded (a replay that did none gives its allowance unit back). */
export class ReplayFailed extends Schema.TaggedError<ReplayFailed>()("ReplayFailed", {
  reason: Schema.String,
  modelWork: Schema.Boolean
}) {}

// Evaluations and eval rules

/** Missing, deleted, or neither owned nor public. */
export class EvaluationNotFound extends Schema.TaggedError<EvaluationNotFound>()("EvaluationNotFound", {
  evaluationId: EvaluationId
}) {}

/** A run that is not one of the caller's runs of the evaluation. */
export class EvaluationRunNotFound extends Schema.TaggedError<EvaluationRunNotFound>()("EvaluationRunNotFound", {
  runId: EvaluationRunId
}) {}

/** None of the traces named by a run request is a live trace of the caller. */
export class NoOwnedTraces extends Schema.TaggedError<NoOwnedTraces>()("NoOwnedTraces", {}) {}

/** A baseline run that has no score (it failed or has not finished). */
export class BaselineRunUnscored extends Schema.TaggedError<BaselineRunUnscored>()("BaselineRunUnscored", {
  runId: EvaluationRunId,
  status: RunStatus
}) {}

/** Missing, deleted, or not the caller's. */
export class EvalRuleNotFound extends Schema.TaggedError<EvalRuleNotFound>()("EvalRuleNotFound", {
  ruleId: Schema.String
}) {}

/** The rule names an evaluation that is missing, deleted, or neither owned nor public. */
export class RuleEvaluationNotFound extends Schema.TaggedError<RuleEvaluationNotFound>()("RuleEvaluationNotFound", {
  evaluationId: Schema.String
}) {}

/** The webhook URL names a host or address deliveries would refuse. */
export class WebhookUrlRefused extends Schema.TaggedError<WebhookUrlRefused>()("WebhookUrlRefused", {
  reason: Schema.String
}) {}

// Enforcement

/** The decision cannot be made: the policy state could not be loaded in time. Enforcement turns it into a block. */
export class PolicyStateUnavailable extends Schema.TaggedError<PolicyStateUnavailable>()("PolicyStateUnavailable", {
  reason: Schema.String
}) {}

export class GuardrailNotFound extends Schema.TaggedError<GuardrailNotFound>()("GuardrailNotFound", {
  id: Schema.String
}) {}

export class HoldNotFound extends Schema.TaggedError<HoldNotFound>()("HoldNotFound", { id: Schema.String }) {}

/** The hold was already approved or denied (or has expired). */
export class HoldAlreadyDecided extends Schema.TaggedError<HoldAlreadyDecided>()("HoldAlreadyDecided", {
  id: Schema.String,
  status: Schema.String
}) {}

// Credentials

/** Why a credential was refused; the reason is safe to show (it never echoes the credential). */
export class InvalidCredential extends Schema.TaggedError<InvalidCredential>()("InvalidCredential", {
  reason: Schema.String
}) {}

/**
 * The API key a request acts for was revoked after this instance last verified it (the request's own statement
 * found out, see `tapedeck_require_live_key`): nothing was decided or written, and the caller is answered 401.
 */
export class CredentialRevoked extends Schema.TaggedError<CredentialRevoked>()("CredentialRevoked", {}) {}

/** TAPEDECK_API_KEYS is not `name=svc_key,…`; the message never repeats a key. */
export class ApiKeysMisconfigured extends Schema.TaggedError<ApiKeysMisconfigured>()("ApiKeysMisconfigured", {
  reason: Schema.String
}) {}

// Ingestion, search, jobs and the model provider

/** No ingestion permit can be had now: the caller should retry later (503 with Retry-After). */
export class IngestSaturated extends Schema.TaggedError<IngestSaturated>()("IngestSaturated", {
  maxInflight: Schema.Number,
  /** Every permit taken ("permits"), or enforcement checks shedding ingestion ("checks"). */
  by: Schema.Literal("permits", "checks")
}) {}

/** The configured embedder could not embed (a remote provider down, misconfigured, timing out). */
export class EmbedderUnavailable extends Schema.TaggedError<EmbedderUnavailable>()("EmbedderUnavailable", {
  reason: Schema.String
}) {}

/** One embeddings call failed in a way a retry may mend (429, 5xx, a network error or a timeout). */
export class EmbeddingRetryable extends Schema.TaggedError<EmbeddingRetryable>()("EmbeddingRetryable", {
  reason: Schema.String
}) {}

export class JobNotFound extends Schema.TaggedError<JobNotFound>()("JobNotFound", { jobId: JobId }) {}

/** A job attempt that did not succeed; the worker retries it with backoff. */
export class JobFailed extends Schema.TaggedError<JobFailed>()("JobFailed", { reason: Schema.String }) {}

/**
 * The model provider could not produce a completion: not configured, timed out, answered an error status
 * (`status` set), answered something that is not a completion, or could not be reached. The message never
 * contains the API key.
 */
export class LlmUnavailable extends Schema.TaggedError<LlmUnavailable>()("LlmUnavailable", {
  reason: Schema.Literal("not_configured", "timeout", "http_error", "bad_response", "network"),
  message: Schema.String,
  status: Schema.optional(Schema.Number)
}) {}

// Storage

/** The embedded data directory is held by another live process (PGlite is single-process). */
export class DataDirInUse extends Schema.TaggedError<DataDirInUse>()("DataDirInUse", {
  dataDir: Schema.String,
  pid: Schema.Number
}) {
  get message() {
    return (
      `the data directory ${this.dataDir} is in use by another Tapedeck process (pid ${this.pid}); ` +
      "stop it first, or set DATABASE_URL to use a PostgreSQL server that several processes can share"
    )
  }
}
