import { Schema } from "effect"
import { required } from "./Described.ts"
import { JobId } from "./Ids.ts"
import { Instant } from "./Instant.ts"

/** queued → running → completed; a failed attempt goes back to queued with a backoff, and after the last one to dead_letter. */
export const JobStatus = Schema.Literal("queued", "running", "completed", "dead_letter")
export type JobStatus = typeof JobStatus.Type

/** GET /api/v1/jobs/{id} */
export const Job = Schema.Struct({
  id: required(JobId, "The job's id"),
  kind: required(Schema.String, "What the job does (batch.run, trace processing…)"),
  status: required(JobStatus, "Where the job is"),
  attempts: required(Schema.Int, "How many times it was started (failed attempts are retried)"),
  error: required(Schema.NullOr(Schema.String), "Why the last attempt failed, or null"),
  createdAt: required(Instant, "When it was queued (ISO 8601)"),
  updatedAt: required(Instant, "When it last changed (ISO 8601)"),
  progress: Schema.optional(Schema.Struct({
    done: required(Schema.Int, "Operations done"),
    total: required(Schema.Int, "Operations in all")
  })).annotations({
    description: "Jobs that report progress (batch.run): operations done out of total"
  }),
  result: Schema.optional(Schema.Unknown).annotations({
    description: "What the job produced so far (batch.run: one {status, body} per operation done, in order)"
  })
}).annotations({ identifier: "Job" })
export type Job = typeof Job.Type

export const JobPath = Schema.Struct({ jobId: JobId })

