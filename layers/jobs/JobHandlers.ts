import { Context, type Effect } from "effect"
import type { ClaimedJob } from "./JobQueue.ts"
import { JobFailed } from "#src/domain/Errors"

export type JobHandler = (job: ClaimedJob) => Effect.Effect<void, JobFailed>

/**
 * Runs many claimed jobs of one kind at once: all succeed, or the batch fails and so does each job's attempt (the
 * retries then run alone, with the kind's JobHandler). Only for idempotent kinds.
 */
export type JobBatchHandler = (jobs: ReadonlyArray<ClaimedJob>) => Effect.Effect<void, JobFailed>

/** How long one attempt may run: its lease less a margin for recording the outcome (at least one second). */
export const attemptTimeoutMs = (leaseSeconds: number) => Math.max(1, leaseSeconds - 5) * 1000

/** What runs each job kind. A kind with no handler here fails its attempts (another instance may know it). */
export class JobHandlers extends Context.Tag("tapedeck/JobHandlers")<JobHandlers, ReadonlyMap<string, JobHandler>>() {}

/** Optional, per job kind: its JobBatchHandler. The worker then runs the kind's first attempts in batches (JobWorker). */
export class JobBatchHandlers extends Context.Tag("tapedeck/JobBatchHandlers")<JobBatchHandlers, ReadonlyMap<string, JobBatchHandler>>() {}

/**
 * Optional, per job kind: what settles a job dead-lettered because its lease expired on its last attempt (the
 * process running it died every time, so no handler saw its last failure), e.g. marking the run it was judging failed.
 */
export class LostJobHandlers extends Context.Tag("tapedeck/LostJobHandlers")<
  LostJobHandlers,
  ReadonlyMap<string, (job: ClaimedJob) => Effect.Effect<void, unknown>>
>() {}

/**
 * Optional: job kinds whose first attempts may wait while this process is busy answering requests, for up to
 * TAPEDECK_JOB_DEFER_SECONDS after the queue was last drained (JobWorker). For work nobody waits on by the second
 * (search indexing), so a burst of ingestion does not pay for the work it causes while it lasts.
 */
export class DeferrableJobKinds extends Context.Tag("tapedeck/DeferrableJobKinds")<DeferrableJobKinds, ReadonlySet<string>>() {}
