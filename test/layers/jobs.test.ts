import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Deferred, Effect, Layer, Ref } from "effect"
import {
  type ClaimedBatchHandler,
  DeferrableJobKinds,
  JobBatchHandlers,
  JobHandlers,
  type JobRegistry,
  jobRegistryLive,
  LostJobHandlers
} from "#layers/jobs/JobHandlers"
import { enterForeground, leaveForeground } from "#layers/jobs/Foreground"
import { backoffMs, type ClaimedJob, JobQueue } from "#layers/jobs/JobQueue"
import { JobWorkerLive } from "#layers/jobs/JobWorker"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { type AccountId, JobId } from "#src/domain/Ids"
import { AppConfig } from "#layers/config/AppConfig"
import { EvaluationRunId } from "#src/domain/Evaluation"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"
import { JobFailed } from "#src/domain/Errors"

let storage: TestStorage
let account: AccountId
beforeAll(async () => {
  storage = await startTestStorage({
    TAPEDECK_JOB_MAX_ATTEMPTS: "3",
    TAPEDECK_JOB_BACKOFF_MS: "20",
    TAPEDECK_JOB_POLL_MS: "10",
    TAPEDECK_JOB_DEFER_SECONDS: "2"
  })
  account = await storage.run(Effect.flatMap(AccountRepo, (repo) => repo.ensure("jobs")).pipe(Effect.provide(AccountRepo.Default)))
})
afterAll(() => storage.stop())

/** Queues a job of any kind as a row: the worker is tested with kinds of its own (the domain's are typed). */
const enqueue = (accountId: AccountId, kind: string, payload: unknown) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { jobMaxAttempts } = yield* AppConfig
    const id = JobId.make(crypto.randomUUID())
    yield* sql`
      INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts)
      VALUES (${id}, ${accountId}, ${kind}, ${JSON.stringify(payload)}::jsonb, 'queued', ${jobMaxAttempts})`
    return id
  }).pipe(Effect.orDie)

const waitFor = <A, E, R>(probe: Effect.Effect<A, E, R>, done: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 300; i++) {
      const value = yield* probe
      if (done(value)) return value
      yield* Effect.sleep("20 millis")
    }
    return yield* probe
  })

/** Runs `body` with a worker whose handlers are `handlers` (and `batchHandlers`, `deferrable` kinds), then stops the worker. */
const withWorker = <A, E>(
  handlers: ReadonlyMap<string, (job: any) => Effect.Effect<void, JobFailed>>,
  body: Effect.Effect<A, E, JobQueue | SqlClient.SqlClient | AppConfig>,
  batchHandlers: ReadonlyMap<string, ClaimedBatchHandler> = new Map(),
  deferrable: ReadonlySet<string> = new Set()
) =>
  Effect.scoped(
    Effect.gen(function*() {
      yield* Layer.buildWithScope(
        JobWorkerLive.pipe(
          Layer.provide(Layer.succeed(JobHandlers, handlers)),
          Layer.provide(Layer.succeed(JobBatchHandlers, batchHandlers)),
          Layer.provide(Layer.succeed(DeferrableJobKinds, deferrable)),
          Layer.provide(JobQueue.Default)
        ),
        yield* Effect.scope
      )
      return yield* body
    })
  ).pipe(Effect.provide(JobQueue.Default))

describe("JobQueue", () => {
  test("backoff doubles from the base and is capped", () => {
    expect([1, 2, 3, 4].map((n) => backoffMs(100, n))).toEqual([100, 200, 400, 800])
    expect(backoffMs(1000, 40)).toBe(3_600_000)
  })

  test("a job that succeeds is completed after one attempt", async () => {
    const job = await storage.run(withWorker(
      new Map([["ok", () => Effect.void]]),
      Effect.gen(function*() {
        const queue = yield* JobQueue
        const id = yield* enqueue(account, "ok", {})
        return yield* waitFor(queue.get(account, id), (j) => j.status === "completed")
      })
    ))
    expect(job).toMatchObject({ status: "completed", attempts: 1, error: null })
  })

  test("a slow job holds only its own slot: jobs queued after it complete while it still runs", async () => {
    const result = await storage.run(Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      return yield* withWorker(
        new Map([["slow", () => Deferred.await(release)], ["quick", () => Effect.void]]),
        Effect.gen(function*() {
          const queue = yield* JobQueue
          const slow = yield* enqueue(account, "slow", {})
          yield* waitFor(queue.get(account, slow), (j) => j.status === "running")
          const quick = yield* Effect.forEach([1, 2, 3], () => enqueue(account, "quick", {}))
          const quickJobs = yield* Effect.forEach(quick, (id) => waitFor(queue.get(account, id), (j) => j.status === "completed"))
          const slowMeanwhile = yield* queue.get(account, slow)
          yield* Deferred.succeed(release, undefined)
          const slowAfter = yield* waitFor(queue.get(account, slow), (j) => j.status === "completed")
          return { quickJobs, slowMeanwhile, slowAfter }
        })
      )
    }))
    expect(result.quickJobs.map((j) => j.status)).toEqual(["completed", "completed", "completed"])
    expect(result.slowMeanwhile.status).toBe("running")
    expect(result.slowAfter).toMatchObject({ status: "completed", attempts: 1 })
  })

  test("a failing job is retried with backoff and dead-lettered after the last attempt", async () => {
    const job = await storage.run(withWorker(
      new Map([["flaky", () => Effect.fail(new JobFailed({ reason: "upstream said no" }))]]),
      Effect.gen(function*() {
        const queue = yield* JobQueue
        const id = yield* enqueue(account, "flaky", {})
        return yield* waitFor(queue.get(account, id), (j) => j.status === "dead_letter")
      })
    ))
    expect(job).toMatchObject({ status: "dead_letter", attempts: 3, error: "upstream said no" })
  })

  test("a job that fails then succeeds completes on its second attempt; unknown kinds and defects count as failures", async () => {
    const result = await storage.run(Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      return yield* withWorker(
        new Map([
          ["second-time", () => Ref.getAndUpdate(calls, (n) => n + 1).pipe(
            Effect.flatMap((n) => (n === 0 ? Effect.fail(new JobFailed({ reason: "first" })) : Effect.void))
          )],
          ["crash", () => Effect.die(new Error("bug"))]
        ]),
        Effect.gen(function*() {
          const queue = yield* JobQueue
          const a = yield* enqueue(account, "second-time", {})
          const b = yield* enqueue(account, "nobody-handles-this", {})
          const c = yield* enqueue(account, "crash", {})
          return yield* Effect.all([
            waitFor(queue.get(account, a), (j) => j.status === "completed"),
            waitFor(queue.get(account, b), (j) => j.status === "dead_letter"),
            waitFor(queue.get(account, c), (j) => j.status === "dead_letter")
          ])
        })
      )
    }))
    expect(result[0]).toMatchObject({ status: "completed", attempts: 2, error: null })
    expect(result[1]).toMatchObject({ status: "dead_letter", error: "no handler for job kind 'nobody-handles-this'" })
    expect(result[2]).toMatchObject({ status: "dead_letter", error: "internal error" })
  })

  test("concurrent claimers never lease the same job twice", async () => {
    const claimed = await storage.run(Effect.gen(function*() {
      const queue = yield* JobQueue
      const ids = yield* Effect.forEach(Array.from({ length: 40 }), () => enqueue(account, "race", {}))
      const batches = yield* Effect.all(Array.from({ length: 8 }, () => Effect.map(queue.claim(10), (c) => c.jobs)), { concurrency: "unbounded" })
      const all = batches.flat().filter((j) => ids.includes(j.id))
      return { ids, all }
    }).pipe(Effect.provide(JobQueue.Default)))
    const seen = claimed.all.map((j) => j.id)
    expect(new Set(seen).size).toBe(seen.length)
    expect(seen.length).toBe(40)
  })

  test("a job whose lease expired (its worker died) is claimed again", async () => {
    const again = await storage.run(Effect.gen(function*() {
      const queue = yield* JobQueue
      const sql = yield* SqlClient.SqlClient
      const id: JobId = yield* enqueue(account, "lease", {})
      yield* sql`UPDATE jobs SET run_at = now() - interval '1 hour' WHERE id = ${id}`
      const first = (yield* queue.claim(100)).jobs.filter((j) => j.id === id)
      yield* sql`UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = ${id}`
      const second = (yield* queue.claim(100)).jobs.filter((j) => j.id === id)
      return { first, second }
    }).pipe(Effect.provide(JobQueue.Default)))
    expect(again.first.length).toBe(1)
    expect(again.second.length).toBe(1)
    expect(again.second[0]!.attempts).toBe(2)
  })

  test("a lease that expires on the last attempt dead-letters the job instead of running it again", async () => {
    const job = await storage.run(Effect.gen(function*() {
      const queue = yield* JobQueue
      const sql = yield* SqlClient.SqlClient
      const id: JobId = yield* enqueue(account, "lost", {})
      yield* sql`UPDATE jobs SET status = 'running', attempts = max_attempts, locked_until = now() - interval '1 second' WHERE id = ${id}`
      const { jobs, lost } = yield* queue.claim(100)
      return { claimed: jobs.filter((j) => j.id === id), lost: lost.filter((j) => j.id === id), job: yield* queue.get(account, id) }
    }).pipe(Effect.provide(JobQueue.Default)))
    expect(job.claimed).toEqual([])
    expect(job.lost.map((j) => j.kind)).toEqual(["lost"])
    expect(job.job).toMatchObject({ status: "dead_letter", attempts: 3 })
  })

  test("a job dead-lettered by its lease is handed to its kind's LostJobHandlers entry (once), never run again", async () => {
    const result = await storage.run(Effect.gen(function*() {
      const settled = yield* Ref.make<Array<string>>([])
      const ran = yield* Ref.make(0)
      const queue = yield* JobQueue
      const sql = yield* SqlClient.SqlClient
      const id: JobId = yield* enqueue(account, "doomed", { what: "a run" })
      yield* sql`UPDATE jobs SET status = 'running', attempts = max_attempts, locked_until = now() - interval '1 second' WHERE id = ${id}`
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.buildWithScope(
          JobWorkerLive.pipe(
            Layer.provide(Layer.succeed(JobHandlers, new Map([["doomed", () => Ref.update(ran, (n) => n + 1)]]))),
            Layer.provide(Layer.succeed(LostJobHandlers, new Map([["doomed", (job: ClaimedJob) => Ref.update(settled, (l) => [...l, `${job.id} ${JSON.stringify(job.payload)}`])]]))),
            Layer.provide(JobQueue.Default)
          ),
          yield* Effect.scope
        )
        yield* waitFor(Ref.get(settled), (l) => l.length > 0)
        yield* Effect.sleep("200 millis") // a few more polls: it is settled once
      }))
      return { settled: yield* Ref.get(settled), ran: yield* Ref.get(ran), job: yield* queue.get(account, id) }
    }).pipe(Effect.provide(JobQueue.Default)))
    expect(result.settled).toEqual([`${result.job.id} {"what":"a run"}`])
    expect(result.ran).toBe(0)
    expect(result.job).toMatchObject({ status: "dead_letter", error: "the last attempt did not finish within its lease" })
  })

  test("a worker whose lease expired cannot complete or fail the newer attempt", async () => {
    const state = await storage.run(Effect.gen(function*() {
      const queue = yield* JobQueue
      const sql = yield* SqlClient.SqlClient
      const id: JobId = yield* enqueue(account, "stale", {})
      yield* sql`UPDATE jobs SET run_at = now() - interval '1 hour' WHERE id = ${id}`
      const stale = (yield* queue.claim(100)).jobs.find((j) => j.id === id)!
      yield* sql`UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = ${id}`
      const fresh = (yield* queue.claim(100)).jobs.find((j) => j.id === id)!
      yield* queue.completeAll([stale])
      yield* queue.fail(stale, "stale worker")
      const afterStale = yield* queue.get(account, id)
      yield* queue.completeAll([fresh])
      return { afterStale, afterFresh: yield* queue.get(account, id) }
    }).pipe(Effect.provide(JobQueue.Default)))
    expect(state.afterStale).toMatchObject({ status: "running", attempts: 2, error: null })
    expect(state.afterFresh).toMatchObject({ status: "completed", attempts: 2 })
  })

  test("first attempts of a kind with a batch handler claimed together run as one batch; other kinds alone", async () => {
    const result = await storage.run(Effect.gen(function*() {
      const queue = yield* JobQueue
      const batches = yield* Ref.make<Array<Array<string>>>([])
      const singles = yield* Ref.make<Array<string>>([])
      // Queued before the worker starts, so that one claim finds them all.
      const ids = yield* Effect.forEach([1, 2, 3, 4, 5], () => enqueue(account, "batched", {}))
      const other = yield* enqueue(account, "plain", {})
      return yield* withWorker(
        new Map([
          ["batched", (job: ClaimedJob) => Ref.update(singles, (l) => [...l, job.id])],
          ["plain", (job: ClaimedJob) => Ref.update(singles, (l) => [...l, job.id])]
        ]),
        Effect.gen(function*() {
          const jobs = yield* Effect.forEach([...ids, other], (id) => waitFor(queue.get(account, id), (j) => j.status === "completed"))
          return { ids, other, jobs, batches: yield* Ref.get(batches), singles: yield* Ref.get(singles) }
        }),
        new Map([["batched", (jobs) => Ref.update(batches, (l) => [...l, jobs.map((j) => j.id as string)])]])
      )
    }).pipe(Effect.provide(JobQueue.Default)))
    expect(result.jobs.map((j) => [j.status, j.attempts])).toEqual(result.jobs.map(() => ["completed", 1]))
    expect(result.batches.map((b) => [...b].sort())).toEqual([[...result.ids].sort()])
    expect(result.singles).toEqual([result.other])
  })

  test("a failed batch fails each job's attempt; the retries run alone, so only the job that fails by itself is dead-lettered", async () => {
    const result = await storage.run(Effect.gen(function*() {
      const queue = yield* JobQueue
      const batchCalls = yield* Ref.make(0)
      const poison = yield* enqueue(account, "batched-poison", { poison: true })
      const good = yield* Effect.forEach([1, 2, 3], () => enqueue(account, "batched-poison", {}))
      const failIfPoison = (jobs: ReadonlyArray<ClaimedJob>) =>
        jobs.some((j) => (j.payload as { poison?: boolean }).poison) ? Effect.fail(new JobFailed({ reason: "poison" })) : Effect.void
      return yield* withWorker(
        new Map([["batched-poison", (job: ClaimedJob) => failIfPoison([job])]]),
        Effect.gen(function*() {
          const goodJobs = yield* Effect.forEach(good, (id) => waitFor(queue.get(account, id), (j) => j.status === "completed"))
          const poisonJob = yield* waitFor(queue.get(account, poison), (j) => j.status === "dead_letter")
          return { goodJobs, poisonJob, batchCalls: yield* Ref.get(batchCalls) }
        }),
        new Map([["batched-poison", (jobs) => Ref.update(batchCalls, (n) => n + 1).pipe(Effect.zipRight(failIfPoison(jobs)))]])
      )
    }).pipe(Effect.provide(JobQueue.Default)))
    expect(result.batchCalls).toBe(1)
    expect(result.goodJobs.map((j) => [j.status, j.attempts])).toEqual([["completed", 2], ["completed", 2], ["completed", 2]])
    expect(result.poisonJob).toMatchObject({ status: "dead_letter", attempts: 3, error: "poison" })
  })

  test("a batched kind has a lane of its own: its jobs run while slow jobs of other kinds hold every slot", async () => {
    const result = await storage.run(Effect.gen(function*() {
      const queue = yield* JobQueue
      const release = yield* Deferred.make<void>()
      const batches = yield* Ref.make<Array<number>>([])
      return yield* withWorker(
        new Map([["hog", () => Deferred.await(release)], ["laned", () => Effect.void]]),
        Effect.gen(function*() {
          const hogs = yield* Effect.forEach(Array.from({ length: 40 }), () => enqueue(account, "hog", {}))
          yield* waitFor(
            Effect.forEach(hogs, (id) => queue.get(account, id)),
            (jobs) => jobs.filter((j) => j.status === "running").length === 32
          )
          const laned = yield* Effect.forEach([1, 2, 3, 4], () => enqueue(account, "laned", {}))
          const lanedJobs = yield* Effect.forEach(laned, (id) => waitFor(queue.get(account, id), (j) => j.status === "completed"))
          const hogsMeanwhile = yield* Effect.forEach(hogs, (id) => queue.get(account, id))
          yield* Deferred.succeed(release, undefined)
          yield* Effect.forEach(hogs, (id) => waitFor(queue.get(account, id), (j) => j.status === "completed"))
          return { lanedJobs, hogsMeanwhile, batches: yield* Ref.get(batches) }
        }),
        new Map([["laned", (jobs) => Ref.update(batches, (l) => [...l, jobs.length])]])
      )
    }).pipe(Effect.provide(JobQueue.Default)))
    expect(result.lanedJobs.map((j) => j.status)).toEqual(["completed", "completed", "completed", "completed"])
    expect(result.hogsMeanwhile.filter((j) => j.status === "running").length).toBe(32)
    expect(result.batches.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(2)
  })

  test("a deferrable kind waits while requests are in flight, at most TAPEDECK_JOB_DEFER_SECONDS; other kinds do not", async () => {
    const result = await storage.run(withWorker(
      new Map([["later", () => Effect.void], ["now", () => Effect.void]]),
      Effect.gen(function*() {
        const queue = yield* JobQueue
        // Idle, the worker catches up (nothing due) at every poll; a deferrable job then runs without waiting.
        const idle = yield* enqueue(account, "later", {})
        yield* waitFor(queue.get(account, idle), (j) => j.status === "completed")
        // While this process answers a request, the deferrable job waits; the other one runs at the next claim.
        yield* Effect.sync(enterForeground)
        const busySince = Date.now()
        return yield* Effect.gen(function*() {
          const later = yield* enqueue(account, "later", {})
          const now = yield* enqueue(account, "now", {})
          yield* waitFor(queue.get(account, now), (j) => j.status === "completed")
          const laterMeanwhile = yield* queue.get(account, later)
          // The budget runs out while the request is still in flight: the deferrable job runs then.
          const laterAfter = yield* waitFor(queue.get(account, later), (j) => j.status === "completed")
          return { laterMeanwhile, laterAfter, waitedMs: Date.now() - busySince }
        }).pipe(Effect.ensuring(Effect.sync(leaveForeground)))
      }),
      new Map(),
      new Set(["later"])
    ))
    expect(result.laterMeanwhile.status).toBe("queued")
    expect(result.laterAfter.status).toBe("completed")
    expect(result.waitedMs).toBeGreaterThanOrEqual(1500)
  })
})

/** A registry whose every kind succeeds at once, with `entries` in their place. */
const registryWith = (entries: Partial<JobRegistry>): JobRegistry => {
  const done = { run: () => Effect.void }
  return {
    "trace.terminal": done,
    "search.index": done,
    "search.reembed": done,
    "fork.replay": done,
    "evaluation.run": done,
    "webhook.deliver": done,
    "batch.run": done,
    ...entries
  }
}

const withRegistry = <A, E>(registry: JobRegistry, body: Effect.Effect<A, E, JobQueue | SqlClient.SqlClient | AppConfig>) =>
  Effect.scoped(
    Effect.gen(function*() {
      yield* Layer.buildWithScope(
        JobWorkerLive.pipe(Layer.provide(jobRegistryLive(Effect.succeed(registry))), Layer.provide(JobQueue.Default)),
        yield* Effect.scope
      )
      return yield* body
    })
  ).pipe(Effect.provide(JobQueue.Default))

describe("JobRegistry", () => {
  test("a handler gets its kind's payload decoded; a payload the kind's schema refuses fails every attempt", async () => {
    const result = await storage.run(Effect.gen(function*() {
      const seen = yield* Ref.make<Array<string>>([])
      const runId = EvaluationRunId.make(crypto.randomUUID())
      return yield* withRegistry(
        registryWith({ "evaluation.run": { run: (job) => Ref.update(seen, (l) => [...l, job.payload.runId]) } }),
        Effect.gen(function*() {
          const queue = yield* JobQueue
          const good = yield* queue.enqueue(account, "evaluation.run", { runId })
          const bad = yield* enqueue(account, "evaluation.run", { runId: "not a uuid" })
          return {
            good: yield* waitFor(queue.get(account, good), (j) => j.status === "completed"),
            bad: yield* waitFor(queue.get(account, bad), (j) => j.status === "dead_letter"),
            seen: yield* Ref.get(seen),
            runId
          }
        })
      )
    }))
    expect(result.good).toMatchObject({ kind: "evaluation.run", attempts: 1 })
    expect(result.bad).toMatchObject({ attempts: 3, error: "malformed evaluation.run payload" })
    expect(result.seen).toEqual([result.runId])
  })

  test("a kind's batch handler gets the decoded batch; deferrable and lost handlers come from the same entry", async () => {
    const result = await storage.run(Effect.gen(function*() {
      const batches = yield* Ref.make<Array<Array<string>>>([])
      const lost = yield* Ref.make<Array<string>>([])
      const traceIds = [1, 2, 3].map(() => crypto.randomUUID())
      const dead = yield* enqueue(account, "fork.replay", { executionId: crypto.randomUUID() })
      const sql = yield* SqlClient.SqlClient
      // Its last attempt ran out of lease: the next claim dead-letters it and hands it to its kind's `lost`.
      yield* sql`UPDATE jobs SET status = 'running', attempts = max_attempts, locked_until = now() - interval '1 second' WHERE id = ${dead}`
      const queue = yield* JobQueue
      yield* queue.enqueueMany(account, "trace.terminal", traceIds.map((traceId) => ({ traceId, status: "completed" as const })))
      return yield* withRegistry(
        registryWith({
          "trace.terminal": {
            run: () => Effect.fail(new JobFailed({ reason: "the batch handler should have run" })),
            batch: (jobs) => Ref.update(batches, (l) => [...l, jobs.map((j) => `${j.payload.traceId}:${j.payload.status}`)]),
            deferrable: true
          },
          "fork.replay": { run: () => Effect.void, lost: (job) => Ref.update(lost, (l) => [...l, job.payload.executionId]) }
        }),
        Effect.gen(function*() {
          yield* waitFor(Ref.get(batches), (b) => b.flat().length === 3)
          yield* waitFor(Ref.get(lost), (l) => l.length === 1)
          return { batches: yield* Ref.get(batches), lost: yield* Ref.get(lost), traceIds, dead: yield* queue.get(account, dead) }
        })
      )
    }).pipe(Effect.provide(JobQueue.Default)))
    expect(result.batches.flat().sort()).toEqual(result.traceIds.map((id) => `${id}:completed`).sort())
    expect(result.lost).toHaveLength(1)
    expect(result.dead.status).toBe("dead_letter")
  })
})

// Compile-time checks (tsc): the registry is total, and a payload follows its kind.
const _typeChecks = Effect.gen(function*() {
  // @ts-expect-error every kind must have a runner
  const partial: JobRegistry = { "trace.terminal": { run: () => Effect.void } }
  const queue = yield* JobQueue
  // @ts-expect-error a fork.replay payload names an executionId
  yield* queue.enqueue(account, "fork.replay", { runId: crypto.randomUUID() })
  // @ts-expect-error no such kind
  yield* queue.enqueue(account, "search.unknown", {})
  return partial
})
