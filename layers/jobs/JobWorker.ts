import { Cause, Effect, FiberSet, Layer, Option, Queue } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import {
  attemptTimeoutMs,
  DeferrableJobKinds,
  type ClaimedBatchHandler,
  JobBatchHandlers,
  JobHandlers,
  LostJobHandlers
} from "./JobHandlers.ts"
import { requestsInFlight, yieldToForeground } from "./Foreground.ts"
import { type ClaimedJob, JobQueue } from "./JobQueue.ts"
import { JobFailed } from "#src/domain/Errors"

/**
 * How many jobs one instance runs at once. A job is claimed only into a free slot and starts at once, so its
 * lease (and the attempt timeout inside it) is measured from the claim.
 */
const SLOTS = 32
/** Most jobs one batch of a kind with a JobBatchHandler takes. */
const BATCH_MAX = 100
/** Under requests that never pause, the worker still claims this often (it waits for gaps otherwise). */
const MAX_YIELD_MS = 1000

/**
 * Runs due jobs in the background of every instance, up to SLOTS at once. Each slot is refilled as soon as its
 * job ends, so one slow job (a webhook to a slow receiver, a judge call, the embedder's first load) never holds
 * the others back; the queue drains at the rate jobs finish, and an idle worker polls every TAPEDECK_JOB_POLL_MS.
 * Kinds with a JobBatchHandler (terminal traces) also have a lane beside the slots: their first attempts run a
 * batch at a time there.
 * Successes are recorded together, one statement per wake-up. A handler's failure, defect or timeout counts as a
 * failed attempt; claiming errors (the database is away) are logged and retried at the next poll. Requests come
 * first: a claim waits while this process answers requests (at most MAX_YIELD_MS), and the first attempts of
 * DeferrableJobKinds are not claimed while requests are still in flight, for up to TAPEDECK_JOB_DEFER_SECONDS after
 * the queue was last drained; so a burst of ingestion is not slowed by the terminal-trace and indexing work it causes,
 * and under a load that never pauses that work trails it by a bounded time.
 */
export const JobWorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const queue = yield* JobQueue
    const handlers = yield* JobHandlers
    const lostHandlers = yield* Effect.serviceOption(LostJobHandlers)
    const batchHandlers: ReadonlyMap<string, ClaimedBatchHandler> = Option.getOrElse(
      yield* Effect.serviceOption(JobBatchHandlers),
      () => new Map()
    )
    const deferrable = [...Option.getOrElse(yield* Effect.serviceOption(DeferrableJobKinds), () => new Set<string>())]
    const config = yield* AppConfig
    const running = yield* FiberSet.make()
    // When the queue last had nothing due that this worker could take: deferrable work waits at most deferMs from it.
    let caughtUpAt = Date.now()
    const deferMs = config.jobDeferSeconds * 1000
    /** The deferrable kinds whose first attempts wait now: while requests are in flight, within the defer budget. */
    const deferredNow = () => (requestsInFlight() > 0 && Date.now() - caughtUpAt < deferMs ? deferrable : [])
    let active = 0
    // A job ending wakes the loop: to record it, and to refill its slot.
    const ended = yield* Queue.sliding<void>(1)
    const succeeded: Array<ClaimedJob> = []

    const withinAttemptTime = <A, R>(attempt: Effect.Effect<A, JobFailed, R>) =>
      Effect.timeoutFail(attempt, {
        duration: `${attemptTimeoutMs(config.jobLeaseSeconds)} millis`,
        onTimeout: () => new JobFailed({ reason: "attempt timed out" })
      })

    /**
     * Records a failed attempt of each job (retried with backoff, or dead-lettered on its last attempt), and logs the
     * cause once (a failed batch is one failure, not a hundred).
     */
    const failed = (jobs: ReadonlyArray<ClaimedJob>, cause: Cause.Cause<JobFailed>) => {
      const reason = Option.match(Cause.failureOption(cause), { onNone: () => "internal error", onSome: (e) => e.reason })
      return Effect.forEach(jobs, (job) => queue.fail(job, reason), { discard: true }).pipe(
        Effect.zipRight(Effect.logWarning(jobs.length === 1 ? "job attempt failed" : `job batch attempt failed (${jobs.length} jobs)`, cause)),
        Effect.annotateLogs({ jobId: jobs.map((j) => j.id).join(","), kind: jobs[0]!.kind, attempt: jobs.map((j) => j.attempts).join(",") }),
        Effect.as([] as ReadonlyArray<ClaimedJob>)
      )
    }

    /** One attempt of a job: the job when it succeeded, nothing when it failed (recorded). */
    const runOne = (job: ClaimedJob) => {
      const handler = handlers.get(job.kind)
      const attempt = handler
        ? handler(job)
        : Effect.fail(new JobFailed({ reason: `no handler for job kind '${job.kind}'` }))
      return attempt.pipe(
        withinAttemptTime,
        Effect.matchCauseEffect({ onSuccess: () => Effect.succeed([job]), onFailure: (cause) => failed([job], cause) }),
        Effect.withSpan("JobWorker.run", { attributes: { "job.kind": job.kind, "job.id": job.id } })
      )
    }

    /** A job dead-lettered with no handler having seen its end: its kind's LostJobHandlers entry settles it. */
    const settleLost = (job: ClaimedJob) => {
      const settle = Option.flatMap(lostHandlers, (map) => Option.fromNullable(map.get(job.kind)))
      return Effect.logWarning("a job was dead-lettered: its last attempt did not finish within its lease").pipe(
        Effect.zipRight(Option.match(settle, { onNone: () => Effect.void, onSome: (f) => f(job) })),
        Effect.catchAllCause((cause) => Effect.logError("could not settle a dead-lettered job", cause)),
        Effect.annotateLogs({ jobId: job.id, kind: job.kind, attempt: job.attempts })
      )
    }

    /**
     * A lane's batch (first attempts of one kind): one attempt for all, each job keeping its own lease. If it fails,
     * each job's attempt failed; the retries run alone in the slots, so a job that fails by itself cannot take its
     * batch with it more than once.
     */
    const runBatch = (jobs: ReadonlyArray<ClaimedJob>) =>
      batchHandlers.get(jobs[0]!.kind)!(jobs).pipe(
        withinAttemptTime,
        Effect.matchCauseEffect({ onSuccess: () => Effect.succeed(jobs), onFailure: (cause) => failed(jobs, cause) }),
        Effect.withSpan("JobWorker.runBatch", { attributes: { "job.kind": jobs[0]!.kind, "job.count": jobs.length } })
      )

    /** Runs `work` (a job, or a lane's batch); what it completed is recorded at the next wake-up. */
    const track = (work: Effect.Effect<ReadonlyArray<ClaimedJob>>, settle: () => void) =>
      FiberSet.run(
        running,
        work.pipe(
          Effect.tap((done) => Effect.sync(() => succeeded.push(...done))),
          Effect.ensuring(Effect.suspend(() => {
            settle()
            return Queue.offer(ended, undefined)
          }))
        )
      )

    const startInSlot = (job: ClaimedJob) => {
      active++
      return track(runOne(job), () => active--)
    }

    /**
     * The lanes: each kind with a batch handler runs its first attempts in batches of up to BATCH_MAX, one batch at
     * a time, beside the slots (which run its retries, alone). A burst of such jobs (an export finishing a hundred
     * traces) then drains a batch at a time even while slow jobs of other kinds hold every slot.
     */
    const laneBusy = new Set<string>()
    const batchKinds = [...batchHandlers.keys()]
    /** Fills the idle lanes but those of `deferred` kinds; whether every lane's queue was found drained. */
    const fillLanes = (deferred: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        let drained = true
        for (const kind of batchKinds) {
          if (laneBusy.has(kind) || deferred.includes(kind)) {
            drained = false
            continue
          }
          const batch = yield* queue.claimFirstAttempts(kind, BATCH_MAX)
          if (batch.length === 0) continue
          if (batch.length === BATCH_MAX) drained = false
          laneBusy.add(kind)
          yield* track(batch.length === 1 ? runOne(batch[0]!) : runBatch(batch), () => laneBusy.delete(kind))
        }
        return drained
      })

    /**
     * Records the successes so far, then fills the idle lanes and the free slots. What next: "full" (every slot and
     * lane taken), "more" (a claim found as many jobs as it asked for) or "idle".
     */
    const refill = Effect.gen(function*() {
      if (succeeded.length > 0) {
        const done = succeeded.slice()
        yield* queue.completeAll(done)
        succeeded.splice(0, done.length) // only once recorded: a failed statement is retried at the next wake-up
      }
      const full = () => active >= SLOTS && batchKinds.every((kind) => laneBusy.has(kind))
      if (full()) return "full" as const
      // Background work shares the event loop with the requests: it waits for a gap in them.
      yield* yieldToForeground(MAX_YIELD_MS)
      const deferred = deferredNow()
      const lanesDrained = yield* fillLanes(deferred)
      const free = SLOTS - active
      const { jobs, lost } = free > 0
        ? yield* queue.claim(free, deferred.length === 0 ? batchKinds : [...batchKinds, ...deferred])
        : { jobs: [], lost: [] }
      yield* Effect.forEach(lost, settleLost, { discard: true })
      yield* Effect.forEach(jobs, startInSlot, { discard: true })
      if (deferred.length === 0 && lanesDrained && jobs.length < free) caughtUpAt = Date.now()
      return full() ? "full" as const : free > 0 && jobs.length === free ? "more" as const : "idle" as const
    }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("job poll failed", cause).pipe(Effect.as("idle" as const)))
    )

    yield* refill.pipe(
      // Full: wait for a job to end. More: claim again at once. Idle: wait for the poll interval, or a job ending.
      Effect.flatMap((next) =>
        next === "full"
          ? Queue.take(ended)
          : next === "more"
          ? Effect.void
          : Queue.take(ended).pipe(Effect.timeout(`${config.jobPollMs} millis`), Effect.ignore)
      ),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
