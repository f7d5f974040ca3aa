import { Cause, Effect, FiberSet, Layer, Option, Queue } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { attemptTimeoutMs, JobFailed, JobHandlers, LostJobHandlers } from "./JobHandlers.ts"
import { yieldToForeground } from "./Foreground.ts"
import { type ClaimedJob, JobQueue } from "./JobQueue.ts"

/**
 * How many jobs one instance runs at once. A job is claimed only into a free slot and starts at once, so its
 * lease (and the attempt timeout inside it) is measured from the claim.
 */
const SLOTS = 32
/** Under requests that never pause, the worker still claims this often (it waits for gaps otherwise). */
const MAX_YIELD_MS = 1000

/**
 * Runs due jobs in the background of every instance, up to SLOTS at once. Each slot is refilled as soon as its
 * job ends, so one slow job (a webhook to a slow receiver, a judge call, the embedder's first load) never holds
 * the others back; the queue drains at the rate jobs finish, and an idle worker polls every TAPEDECK_JOB_POLL_MS.
 * Successes are recorded together, one statement per wake-up. A handler's failure, defect or timeout counts as a
 * failed attempt; claiming errors (the database is away) are logged and retried at the next poll. Requests come
 * first: a claim waits while this process answers requests (at most MAX_YIELD_MS), so a burst of ingestion is not
 * slowed by the terminal-trace and indexing work it causes; that work catches up in the gaps.
 */
export const JobWorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const queue = yield* JobQueue
    const handlers = yield* JobHandlers
    const lostHandlers = yield* Effect.serviceOption(LostJobHandlers)
    const config = yield* AppConfig
    const running = yield* FiberSet.make()
    let active = 0
    // A job ending wakes the loop: to record it, and to refill its slot.
    const ended = yield* Queue.sliding<void>(1)
    const succeeded: Array<ClaimedJob> = []

    const runOne = (job: ClaimedJob) => {
      const handler = handlers.get(job.kind)
      const attempt = handler
        ? handler(job)
        : Effect.fail(new JobFailed({ reason: `no handler for job kind '${job.kind}'` }))
      return attempt.pipe(
        Effect.timeoutFail({
          duration: `${attemptTimeoutMs(config.jobLeaseSeconds)} millis`,
          onTimeout: () => new JobFailed({ reason: "attempt timed out" })
        }),
        Effect.matchCauseEffect({
          onSuccess: () => Effect.succeed(Option.some(job)),
          onFailure: (cause) => {
            const reason = Option.match(Cause.failureOption(cause), {
              onNone: () => "internal error",
              onSome: (e) => e.reason
            })
            return queue.fail(job, reason).pipe(
              Effect.zipRight(Effect.logWarning("job attempt failed", cause)),
              Effect.annotateLogs({ jobId: job.id, kind: job.kind, attempt: job.attempts }),
              Effect.as(Option.none<ClaimedJob>())
            )
          }
        }),
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

    const start = (job: ClaimedJob) => {
      active++
      return FiberSet.run(
        running,
        runOne(job).pipe(
          Effect.tap((done) => Effect.sync(() => Option.isSome(done) && succeeded.push(done.value))),
          Effect.ensuring(Effect.suspend(() => {
            active--
            return Queue.offer(ended, undefined)
          }))
        )
      )
    }

    /** Records the successes so far, then fills the free slots; whether every slot is taken (more may be due). */
    const refill = Effect.gen(function*() {
      if (succeeded.length > 0) {
        const done = succeeded.slice()
        yield* queue.completeAll(done)
        succeeded.splice(0, done.length) // only once recorded: a failed statement is retried at the next wake-up
      }
      const free = SLOTS - active
      if (free === 0) return true
      // Background work shares the event loop with the requests: it waits for a gap in them.
      yield* yieldToForeground(MAX_YIELD_MS)
      const { jobs, lost } = yield* queue.claim(free)
      yield* Effect.forEach(lost, settleLost, { discard: true })
      yield* Effect.forEach(jobs, start, { discard: true })
      return jobs.length === free
    }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("job poll failed", cause).pipe(Effect.as(false)))
    )

    yield* refill.pipe(
      // Saturated: wait for a job to end. Otherwise: wait for the poll interval, or a job ending to record.
      Effect.flatMap((saturated) =>
        saturated
          ? Queue.take(ended)
          : Queue.take(ended).pipe(Effect.timeout(`${config.jobPollMs} millis`), Effect.ignore)
      ),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
