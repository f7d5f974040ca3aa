import { Context, Effect, Layer, Schema } from "effect"
import { type JobKind, type JobPayload, JobPayloads } from "#src/domain/Jobs"
import type { ClaimedJob } from "./JobQueue.ts"
import { JobFailed } from "#src/domain/Errors"

/** A claimed job of kind `K`, its payload decoded with the kind's schema. */
export interface JobOf<K extends JobKind> extends Omit<ClaimedJob, "kind" | "payload"> {
  readonly kind: K
  readonly payload: JobPayload<K>
}

export type JobHandler<K extends JobKind> = (job: JobOf<K>) => Effect.Effect<void, JobFailed>

/**
 * Runs many claimed jobs of one kind at once: all succeed, or the batch fails and so does each job's attempt (the
 * retries then run alone, with the kind's JobHandler). Only for idempotent kinds.
 */
export type JobBatchHandler<K extends JobKind> = (jobs: ReadonlyArray<JobOf<K>>) => Effect.Effect<void, JobFailed>

/** How one kind of job runs. */
export interface JobRunner<K extends JobKind> {
  readonly run: JobHandler<K>
  /** Its first attempts run in batches, in a lane of their own (JobWorker). */
  readonly batch?: JobBatchHandler<K>
  /**
   * Settles a job dead-lettered because its lease expired on its last attempt (the process running it died every
   * time, so no handler saw its last failure), e.g. marking the run it was judging failed.
   */
  readonly lost?: (job: JobOf<K>) => Effect.Effect<void, unknown>
  /**
   * Its first attempts may wait while this process is busy answering requests, for up to TAPEDECK_JOB_DEFER_SECONDS
   * after the queue was last drained (JobWorker): for work nobody waits on by the second (search indexing), so a burst
   * of ingestion does not pay for the work it causes while it lasts.
   */
  readonly deferrable?: boolean
}

/** What runs each job kind: a record the compiler holds to every kind of the domain's union. */
export type JobRegistry = { readonly [K in JobKind]: JobRunner<K> }

/** How long one attempt may run: its lease less a margin for recording the outcome (at least one second). */
export const attemptTimeoutMs = (leaseSeconds: number) => Math.max(1, leaseSeconds - 5) * 1000

export type ClaimedJobHandler = (job: ClaimedJob) => Effect.Effect<void, JobFailed>
export type ClaimedBatchHandler = (jobs: ReadonlyArray<ClaimedJob>) => Effect.Effect<void, JobFailed>

/**
 * The worker's dispatch table, by the kind a row carries (jobRegistryLive builds it from a JobRegistry). A kind with
 * no handler here fails its attempts (another instance may know it).
 */
export class JobHandlers extends Context.Tag("tapedeck/JobHandlers")<JobHandlers, ReadonlyMap<string, ClaimedJobHandler>>() {}

/** Optional, per job kind: its batch handler. The worker then runs the kind's first attempts in batches (JobWorker). */
export class JobBatchHandlers extends Context.Tag("tapedeck/JobBatchHandlers")<JobBatchHandlers, ReadonlyMap<string, ClaimedBatchHandler>>() {}

/** Optional, per job kind: what settles a job dead-lettered with its lease expired on its last attempt. */
export class LostJobHandlers extends Context.Tag("tapedeck/LostJobHandlers")<
  LostJobHandlers,
  ReadonlyMap<string, (job: ClaimedJob) => Effect.Effect<void, unknown>>
>() {}

/** Optional: the kinds whose first attempts may wait while this process answers requests (JobRunner.deferrable). */
export class DeferrableJobKinds extends Context.Tag("tapedeck/DeferrableJobKinds")<DeferrableJobKinds, ReadonlySet<string>>() {}

/** The job with its payload decoded by its kind's schema; a payload that does not decode fails the attempt. */
const decodeJob = <K extends JobKind>(kind: K) => {
  const decode = Schema.decodeUnknown(JobPayloads[kind] as unknown as Schema.Schema<JobPayload<K>, unknown>)
  return (job: ClaimedJob): Effect.Effect<JobOf<K>, JobFailed> =>
    decode(job.payload).pipe(
      Effect.map((payload) => ({ ...job, kind, payload })),
      Effect.mapError(() => new JobFailed({ reason: `malformed ${kind} payload` }))
    )
}

/** The worker's dispatch tables from a registry: each handler gets its jobs' payloads decoded. */
export const jobRegistryLive = <E, R>(registry: Effect.Effect<JobRegistry, E, R>) =>
  Layer.effectContext(Effect.map(registry, (entries) => {
    const handlers = new Map<string, ClaimedJobHandler>()
    const batches = new Map<string, ClaimedBatchHandler>()
    const lost = new Map<string, (job: ClaimedJob) => Effect.Effect<void, unknown>>()
    const deferrable = new Set<string>()
    const add = <K extends JobKind>(kind: K, runner: JobRunner<K>) => {
      const decode = decodeJob(kind)
      handlers.set(kind, (job) => Effect.flatMap(decode(job), runner.run))
      const { batch, lost: settle } = runner
      if (batch) batches.set(kind, (jobs) => Effect.flatMap(Effect.forEach(jobs, decode), batch))
      if (settle) lost.set(kind, (job) => Effect.flatMap(decode(job), settle))
      if (runner.deferrable) deferrable.add(kind)
    }
    for (const kind of Object.keys(entries) as Array<JobKind>) add(kind, entries[kind] as JobRunner<typeof kind>)
    return Context.make(JobHandlers, handlers as ReadonlyMap<string, ClaimedJobHandler>).pipe(
      Context.add(JobBatchHandlers, batches as ReadonlyMap<string, ClaimedBatchHandler>),
      Context.add(LostJobHandlers, lost as ReadonlyMap<string, (job: ClaimedJob) => Effect.Effect<void, unknown>>),
      Context.add(DeferrableJobKinds, deferrable as ReadonlySet<string>)
    )
  }))
