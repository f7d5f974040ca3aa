import { Schema } from "effect"
import { JobId } from "./Ids.ts"
import { Instant } from "./Instant.ts"

/** queued → running → completed; a failed attempt goes back to queued with a backoff, and after the last one to dead_letter. */
export const JobStatus = Schema.Literal("queued", "running", "completed", "dead_letter")
export type JobStatus = typeof JobStatus.Type

/** GET /api/v1/jobs/{id} */
export const Job = Schema.Struct({
  id: JobId,
  kind: Schema.String,
  status: JobStatus,
  attempts: Schema.Int,
  error: Schema.NullOr(Schema.String),
  createdAt: Instant,
  updatedAt: Instant,
  progress: Schema.optional(Schema.Struct({ done: Schema.Int, total: Schema.Int })).annotations({
    description: "Jobs that report progress (batch.run): operations done out of total"
  }),
  result: Schema.optional(Schema.Unknown).annotations({
    description: "What the job produced so far (batch.run: one {status, body} per operation done, in order)"
  })
}).annotations({ identifier: "Job" })
export type Job = typeof Job.Type

export const JobPath = Schema.Struct({ jobId: JobId })

export class JobNotFound extends Schema.TaggedError<JobNotFound>()("JobNotFound", { jobId: JobId }) {}
