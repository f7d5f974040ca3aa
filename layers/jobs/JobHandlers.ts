import { Context, type Effect, Schema } from "effect"
import type { ClaimedJob } from "./JobQueue.ts"

/** A job attempt that did not succeed; the worker retries it with backoff. */
export class JobFailed extends Schema.TaggedError<JobFailed>()("JobFailed", { reason: Schema.String }) {}

export type JobHandler = (job: ClaimedJob) => Effect.Effect<void, JobFailed>

/** What runs each job kind. A kind with no handler here fails its attempts (another instance may know it). */
export class JobHandlers extends Context.Tag("tapedeck/JobHandlers")<JobHandlers, ReadonlyMap<string, JobHandler>>() {}
