import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { BatchJobPayload, BatchOperationResult } from "#src/domain/Batch"
import type { JobKind } from "#src/domain/Jobs"
import { type AccountId, JobId } from "#src/domain/Ids"
import { AppConfig } from "../config/AppConfig.ts"


/**
 * The durable side of background batches: a `batch.run` job in the shared job queue whose progress and
 * per-operation results are appended one operation at a time, so a batch whose worker died resumes after
 * the last recorded operation instead of running the batch again.
 */
export class BatchRepo extends Effect.Service<BatchRepo>()("tapedeck/BatchRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig

    const enqueue = Effect.fn("BatchRepo.enqueue")(
      function*(accountId: AccountId, payload: BatchJobPayload) {
        const id = JobId.make(crypto.randomUUID())
        yield* sql`
          INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts, result, progress_done, progress_total)
          VALUES (${id}, ${accountId}, ${"batch.run" satisfies JobKind}, ${JSON.stringify(payload)}::jsonb, 'queued',
                  ${config.jobMaxAttempts}, '[]'::jsonb, 0, ${payload.operations.length})`
        return id
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** How many operations of the job are recorded (where an attempt resumes). */
    const progress = Effect.fn("BatchRepo.progress")(
      function*(jobId: string) {
        const rows = yield* sql<{ done: number }>`SELECT COALESCE(progress_done, 0) AS done FROM jobs WHERE id = ${jobId}`
        return rows[0]?.done ?? 0
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Appends the result of operation `index` for the attempt that holds the job; false when that attempt lost
     * its lease (another worker owns the job now) or the result was already recorded.
     */
    const record = Effect.fn("BatchRepo.record")(
      function*(jobId: string, attempt: number, index: number, result: BatchOperationResult) {
        const rows = yield* sql`
          UPDATE jobs SET result = COALESCE(result, '[]'::jsonb) || jsonb_build_array(${JSON.stringify(result)}::jsonb),
                          progress_done = ${index + 1}, updated_at = now()
          WHERE id = ${jobId} AND attempts = ${attempt} AND status = 'running' AND progress_done = ${index}
          RETURNING id`
        return rows.length > 0
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { enqueue, progress, record } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
