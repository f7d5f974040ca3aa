import { Schema } from "effect"
import { BatchJobPayload } from "./Batch.ts"
import { EvaluationRunId } from "./Evaluation.ts"
import { WebhookJobPayload } from "./Webhook.ts"

/** A trace that became terminal: detection and evaluation rules run on it. */
export const TerminalTracePayload = Schema.Struct({
  traceId: Schema.UUID,
  status: Schema.Literal("completed", "failed")
})

/** The traces a write touched, whose spans are embedded for search (one trace: the older form). */
export const SearchIndexPayload = Schema.Union(
  Schema.Struct({ traceIds: Schema.Array(Schema.UUID) }),
  Schema.Struct({ traceId: Schema.UUID })
)

/**
 * Every kind of background job with the schema of its payload: the job queue takes and hands over payloads of
 * these types only. A new kind is one entry here and one in the job registry (src/app/JobRegistry.ts), which the
 * compiler holds to every kind.
 */
export const JobPayloads = {
  "trace.terminal": TerminalTracePayload,
  "search.index": SearchIndexPayload,
  /** Embeds every span of the account that has no vector from the current embedder, in resumable slices. */
  "search.reembed": Schema.Struct({}),
  /** Runs one generation of a fork replay on the server. */
  "fork.replay": Schema.Struct({ executionId: Schema.UUID }),
  "evaluation.run": Schema.Struct({ runId: EvaluationRunId }),
  "webhook.deliver": WebhookJobPayload,
  "batch.run": BatchJobPayload
} as const

export type JobKind = keyof typeof JobPayloads
export type JobPayload<K extends JobKind> = Schema.Schema.Type<(typeof JobPayloads)[K]>

/** The kinds this version knows (a row may carry another: written by a newer instance during a rolling deploy). */
export const isJobKind = (kind: string): kind is JobKind => Object.hasOwn(JobPayloads, kind)

/** The kinds whose jobs search indexing queues (its pending count in diagnostics). */
export const SEARCH_JOB_KINDS = ["search.index", "search.reembed"] as const satisfies ReadonlyArray<JobKind>
