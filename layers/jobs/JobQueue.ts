import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { AccountId, JobId } from "#src/domain/Ids"
import { InstantFromDate } from "#src/domain/Instant"
import { type Job, JobStatus } from "#src/domain/Job"
import { type JobKind, type JobPayload, JobPayloads } from "#src/domain/Jobs"
import { AppConfig } from "../config/AppConfig.ts"
import { textArray } from "../storage/SqlArrays.ts"
import { JobNotFound } from "#src/domain/Errors"

const JobRow = Schema.Struct({
  id: JobId,
  kind: Schema.String,
  status: JobStatus,
  attempts: Schema.Int,
  error: Schema.NullOr(Schema.String),
  createdAt: InstantFromDate,
  updatedAt: InstantFromDate,
  result: Schema.NullOr(Schema.Unknown),
  progressDone: Schema.NullOr(Schema.Int),
  progressTotal: Schema.NullOr(Schema.Int)
})

/** A job to enqueue: its kind and that kind's payload. */
export type NewJob = { readonly [K in JobKind]: { readonly kind: K; readonly payload: JobPayload<K> } }[JobKind]

/** A job handed to a worker: its lease is held until it completes or fails. */
export interface ClaimedJob {
  readonly id: JobId
  readonly accountId: AccountId
  readonly kind: string
  readonly payload: unknown
  readonly attempts: number
  readonly maxAttempts: number
}

/** A payload as stored: encoded by its kind's schema (a payload the schema refuses is a defect: our own bug). */
export const encodePayload = <K extends JobKind>(kind: K, payload: JobPayload<K>): Effect.Effect<unknown> =>
  Schema.encode(JobPayloads[kind] as unknown as Schema.Schema<JobPayload<K>, unknown>)(payload).pipe(Effect.orDie)

/** Delay before attempt n+1 after n failed attempts: base · 2^(n-1), capped at one hour. */
export const backoffMs = (base: number, attempts: number) =>
  Math.min(3_600_000, base * 2 ** Math.max(0, Math.min(attempts - 1, 30)))

/**
 * A durable job queue in PostgreSQL that several API instances share: jobs are claimed with
 * `FOR UPDATE SKIP LOCKED` under a lease, retried with exponential backoff and dead-lettered after
 * `TAPEDECK_JOB_MAX_ATTEMPTS` attempts. A job whose worker died is claimed again once its lease expires.
 */
export class JobQueue extends Effect.Service<JobQueue>()("tapedeck/JobQueue", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig

    const insertOne = Effect.fn("JobQueue.enqueue")(
      function* (accountId: AccountId, kind: JobKind, payload: unknown) {
        const id = JobId.make(crypto.randomUUID())
        yield* sql`
          INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts)
          VALUES (${id}, ${accountId}, ${kind}, ${JSON.stringify(payload)}::jsonb, 'queued', ${config.jobMaxAttempts})`
        return id
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const insertMany = Effect.fn("JobQueue.enqueueMany")(
      function* (accountId: AccountId, kind: JobKind, payloads: ReadonlyArray<unknown>) {
        if (payloads.length === 0) return
        yield* sql`
          INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts)
          SELECT gen_random_uuid(), ${accountId}::uuid, ${kind}::text, p.value, 'queued', ${config.jobMaxAttempts}::int
          FROM jsonb_array_elements(${JSON.stringify(payloads)}::jsonb) AS p`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Enqueues in the caller's transaction, if any: the job exists exactly when the write that caused it does. */
    const enqueue = <K extends JobKind>(accountId: AccountId, kind: K, payload: JobPayload<K>) =>
      Effect.flatMap(encodePayload(kind, payload), (encoded) => insertOne(accountId, kind, encoded))

    /** Enqueues several jobs of one kind in one statement (in the caller's transaction, if any). */
    const enqueueMany = <K extends JobKind>(accountId: AccountId, kind: K, payloads: ReadonlyArray<JobPayload<K>>) =>
      Effect.flatMap(
        Effect.forEach(payloads, (payload) => encodePayload(kind, payload)),
        (encoded) => insertMany(accountId, kind, encoded)
      )

    /**
     * For a writer that folds its jobs into its own statement (one round trip fewer): a CTE named `job_rows`
     * inserting them, to follow other CTEs (it starts with a comma). The jobs exist exactly when that statement's
     * writes do.
     */
    const inStatement = (accountId: AccountId, jobs: ReadonlyArray<NewJob>) =>
      Effect.map(
        Effect.forEach(jobs, ({ kind, payload }) =>
          Effect.map(encodePayload(kind, payload as never), (encoded) => ({ kind, payload: encoded }))
        ),
        (encoded) => sql`, job_rows AS (
          INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts)
          SELECT gen_random_uuid(), ${accountId}::uuid, j.kind, j.payload, 'queued', ${config.jobMaxAttempts}::int
          FROM jsonb_to_recordset(${JSON.stringify(encoded)}::jsonb) AS j(kind text, payload jsonb)
        )`
      )

    const findOwned = SqlSchema.findOne({
      Request: Schema.Struct({ accountId: AccountId, jobId: JobId }),
      Result: JobRow,
      execute: ({ accountId, jobId }) =>
        sql`SELECT id, kind, status, attempts, error, created_at AS "createdAt", updated_at AS "updatedAt",
                   result, progress_done AS "progressDone", progress_total AS "progressTotal"
            FROM jobs WHERE id = ${jobId} AND account_id = ${accountId}`
    })

    /** A job of the account; `JobNotFound` for a missing or foreign one. */
    const get = Effect.fn("JobQueue.get")(
      function* (accountId: AccountId, jobId: JobId) {
        const row = yield* findOwned({ accountId, jobId })
        if (Option.isNone(row)) return yield* new JobNotFound({ jobId })
        const { progressDone, progressTotal, result, ...job } = row.value
        return {
          ...job,
          ...(progressTotal === null ? {} : { progress: { done: progressDone ?? 0, total: progressTotal } }),
          ...(result === null ? {} : { result })
        } satisfies Job
      },
      Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die })
    )

    /**
     * Leases up to `max` due jobs (queued and due, or running with an expired lease), as `jobs`. A job whose lease
     * expired on its last attempt (its worker died every time) is dead-lettered instead of run again, and returned
     * as `lost`, so that what it was doing can be settled (see LostJobHandlers). First attempts of `laneKinds` are
     * left to the worker's lanes, which claim them in batches (`claimFirstAttempts`).
     */
    const claim = Effect.fn("JobQueue.claim")(
      function* (max: number, laneKinds: ReadonlyArray<string> = []) {
        const lost = yield* sql<ClaimedJob>`
          UPDATE jobs SET status = 'dead_letter', locked_until = NULL, updated_at = now(),
                          error = COALESCE(error, 'the last attempt did not finish within its lease')
          WHERE status = 'running' AND locked_until < now() AND attempts >= max_attempts
          RETURNING id, account_id AS "accountId", kind, payload, attempts, max_attempts AS "maxAttempts"`
        const rows = yield* sql<ClaimedJob>`
          UPDATE jobs SET status = 'running', attempts = attempts + 1, updated_at = now(),
                          locked_until = now() + make_interval(secs => ${config.jobLeaseSeconds})
          WHERE id IN (
            SELECT id FROM jobs
            -- A lease that ran out on the last attempt is the first statement's to dead-letter (next cycle, if it ran
            -- out between the two), never another attempt.
            WHERE (status = 'queued' AND run_at <= now() AND NOT (attempts = 0 AND kind = ANY(${textArray(laneKinds)}::text[])))
               OR (status = 'running' AND locked_until < now() AND attempts < max_attempts)
            ORDER BY run_at
            LIMIT ${max}
            FOR UPDATE SKIP LOCKED)
          RETURNING id, account_id AS "accountId", kind, payload, attempts, max_attempts AS "maxAttempts"`
        return { jobs: rows, lost }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Claims up to `max` due jobs of `kind` that no attempt has run yet (a lane's batch; retried jobs run alone). */
    const claimFirstAttempts = Effect.fn("JobQueue.claimFirstAttempts")(
      function* (kind: string, max: number) {
        if (max <= 0) return []
        return yield* sql<ClaimedJob>`
          UPDATE jobs SET status = 'running', attempts = attempts + 1, updated_at = now(),
                          locked_until = now() + make_interval(secs => ${config.jobLeaseSeconds})
          WHERE id IN (
            SELECT id FROM jobs
            WHERE status = 'queued' AND run_at <= now() AND kind = ${kind} AND attempts = 0
            ORDER BY run_at
            LIMIT ${max}
            FOR UPDATE SKIP LOCKED)
          RETURNING id, account_id AS "accountId", kind, payload, attempts, max_attempts AS "maxAttempts"`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Marks leased jobs completed, in one statement. Each update names the attempt it finishes, so a worker
     * whose lease expired (and whose job was claimed again) cannot overwrite the newer attempt.
     */
    const completeAll = Effect.fn("JobQueue.completeAll")(
      function* (jobs: ReadonlyArray<Pick<ClaimedJob, "id" | "attempts">>) {
        if (jobs.length === 0) return
        yield* sql`
          UPDATE jobs SET status = 'completed', error = NULL, locked_until = NULL, updated_at = now()
          FROM jsonb_to_recordset(${JSON.stringify(jobs.map((j) => ({ id: j.id, attempts: j.attempts })))}::jsonb)
            AS x(id uuid, attempts int)
          WHERE jobs.id = x.id AND jobs.attempts = x.attempts AND jobs.status = 'running'`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Records a failed attempt: back to the queue after a backoff, or dead-lettered after the last attempt. */
    const fail = Effect.fn("JobQueue.fail")(
      function* (job: ClaimedJob, error: string) {
        const dead = job.attempts >= job.maxAttempts
        const delayMs = backoffMs(config.jobBackoffMs, job.attempts)
        yield* sql`
          UPDATE jobs SET status = ${dead ? "dead_letter" : "queued"}, error = ${error.slice(0, 4000)},
                          locked_until = NULL, updated_at = now(),
                          run_at = now() + make_interval(secs => ${delayMs / 1000})
          WHERE id = ${job.id} AND attempts = ${job.attempts} AND status = 'running'`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { enqueue, enqueueMany, inStatement, get, claim, claimFirstAttempts, completeAll, fail } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
