import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { Fork, ForkStatus } from "#src/domain/Fork"
import type { AccountId, ForkId } from "#src/domain/Ids"
import { unwrap } from "../traces/SpanRecords.ts"
import { ForkNotFound } from "#src/domain/Errors"

const FORK_SELECT = `id, trace_id, fork_point_span_id, name, description,
  jsonb_build_array(modified_input) AS modified_input, mock_outputs, status, result_trace_id, generation,
  execution_id, mode, error, created_at, updated_at`

interface ForkRow {
  readonly id: string
  readonly trace_id: string
  readonly fork_point_span_id: string
  readonly name: string | null
  readonly description: string | null
  readonly modified_input: unknown
  readonly mock_outputs: Record<string, unknown> | null
  readonly status: ForkStatus
  readonly result_trace_id: string | null
  readonly generation: number
  readonly execution_id: string | null
  readonly mode: "sdk" | "server" | null
  readonly error: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

const toFork = (row: ForkRow): Fork => ({
  id: row.id,
  traceId: row.trace_id,
  forkPointSpanId: row.fork_point_span_id,
  name: row.name,
  description: row.description,
  modifiedInput: unwrap(row.modified_input),
  ...(row.mock_outputs === null ? {} : { mockOutputs: row.mock_outputs }),
  status: row.status,
  resultTraceId: row.result_trace_id,
  generation: row.generation,
  executionId: row.execution_id,
  mode: row.mode,
  error: row.error,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString()
})

export interface NewFork {
  readonly id: ForkId
  readonly traceId: string
  readonly forkPointSpanId: string
  readonly name: string | null
  readonly description: string | null
  readonly modifiedInput: unknown
  readonly mockOutputs: Record<string, unknown> | null
}

export interface StartedGeneration {
  readonly executionId: string
  readonly resultTraceId: string
  readonly generation: number
  readonly month: string
}

/** Forks, their replay generations and the monthly replay allowance. Every read is scoped to the account. */
export class ForkRepo extends Effect.Service<ForkRepo>()("tapedeck/ForkRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = Effect.fn("ForkRepo.insert")(
      function*(accountId: AccountId, fork: NewFork) {
        const rows = yield* sql<ForkRow>`
          INSERT INTO forks (id, account_id, trace_id, fork_point_span_id, name, description, modified_input,
                             mock_outputs, status)
          VALUES (${fork.id}, ${accountId}, ${fork.traceId}, ${fork.forkPointSpanId}, ${fork.name},
                  ${fork.description}, (${JSON.stringify([fork.modifiedInput])}::jsonb)->0,
                  ${fork.mockOutputs === null ? null : JSON.stringify(fork.mockOutputs)}::jsonb, 'pending')
          RETURNING ${sql.literal(FORK_SELECT)}`
        return toFork(rows[0]!)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const find = Effect.fn("ForkRepo.find")(
      function*(accountId: AccountId, forkId: ForkId, lock = false) {
        const rows = yield* sql<ForkRow>`
          SELECT ${sql.literal(FORK_SELECT)} FROM forks
          WHERE id = ${forkId} AND account_id = ${accountId}
          ${lock ? sql`FOR UPDATE` : sql``}`
        const row = rows[0]
        if (row === undefined) return yield* new ForkNotFound({ forkId })
        return toFork(row)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const list = Effect.fn("ForkRepo.list")(
      function*(accountId: AccountId, limit: number, offset: number) {
        const [rows, totals] = yield* Effect.all([
          sql<ForkRow>`
            SELECT ${sql.literal(FORK_SELECT)} FROM forks WHERE account_id = ${accountId}
            ORDER BY created_at DESC, id DESC LIMIT ${limit} OFFSET ${offset}`,
          sql<{ n: number }>`SELECT count(*)::float8 AS n FROM forks WHERE account_id = ${accountId}`
        ], { concurrency: 2 })
        return { items: rows.map(toFork), total: totals[0]?.n ?? 0, limit, offset }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Takes one unit of the month's allowance; false when it is spent. Atomic across instances. */
    const reserveUnit = Effect.fn("ForkRepo.reserveUnit")(
      function*(accountId: AccountId, month: string, allowance: number) {
        if (allowance <= 0) return false
        const rows = yield* sql`
          INSERT INTO replay_usage (account_id, month, used) VALUES (${accountId}, ${month}, 1)
          ON CONFLICT (account_id, month) DO UPDATE SET used = replay_usage.used + 1
          WHERE replay_usage.used < ${allowance}
          RETURNING used`
        return rows.length > 0
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const refundUnit = Effect.fn("ForkRepo.refundUnit")(
      function*(accountId: AccountId, month: string) {
        yield* sql`
          UPDATE replay_usage SET used = GREATEST(0, used - 1) WHERE account_id = ${accountId} AND month = ${month}`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Moves a locked fork into a new replaying generation. */
    const startGeneration = Effect.fn("ForkRepo.startGeneration")(
      function*(accountId: AccountId, fork: Fork, mode: "sdk" | "server", month: string) {
        const started: StartedGeneration = {
          executionId: crypto.randomUUID(),
          resultTraceId: crypto.randomUUID(),
          generation: (fork.generation ?? 0) + 1,
          month
        }
        yield* sql`
          UPDATE forks SET status = 'replaying', generation = ${started.generation},
                           execution_id = ${started.executionId}, result_trace_id = ${started.resultTraceId},
                           mode = ${mode}, error = NULL, updated_at = now()
          WHERE id = ${fork.id}`
        yield* sql`
          INSERT INTO replay_generations (execution_id, fork_id, account_id, generation, mode, status,
                                          result_trace_id, usage_month)
          VALUES (${started.executionId}, ${fork.id}, ${accountId}, ${started.generation}, ${mode}, 'replaying',
                  ${started.resultTraceId}, ${month})`
        return started
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Records how a generation ended, on it and on its fork (only if the fork is still on that generation). */
    const finishGeneration = Effect.fn("ForkRepo.finishGeneration")(
      function*(outcome: {
        readonly executionId: string
        readonly status: "completed" | "failed"
        readonly byteReplayed: number
        readonly faithfulReexec: number
        readonly caveats: ReadonlyArray<string>
        readonly error: string | null
      }) {
        yield* sql`
          UPDATE replay_generations SET status = ${outcome.status}, byte_replayed = ${outcome.byteReplayed},
                 faithful_reexec = ${outcome.faithfulReexec}, fidelity_caveats = ${JSON.stringify(outcome.caveats)}::jsonb,
                 error = ${outcome.error}, finished_at = now()
          WHERE execution_id = ${outcome.executionId}`
        yield* sql`
          UPDATE forks SET status = ${outcome.status}, error = ${outcome.error}, updated_at = now()
          WHERE execution_id = ${outcome.executionId} AND status = 'replaying'`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The generation an execution id names, with its fork's owner. */
    const findGeneration = Effect.fn("ForkRepo.findGeneration")(
      function*(executionId: string) {
        const rows = yield* sql<{ forkId: string; accountId: string; generation: number; status: string; resultTraceId: string; month: string }>`
          SELECT fork_id AS "forkId", account_id AS "accountId", generation, status,
                 result_trace_id AS "resultTraceId", usage_month AS month
          FROM replay_generations WHERE execution_id = ${executionId}`
        return Option.fromNullable(rows[0])
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Whether the fork's active generation started more than `seconds` ago: its instance died mid-replay, so
     * a new replay may take over (the generation is recorded as failed).
     */
    const abandonStale = Effect.fn("ForkRepo.abandonStale")(
      function*(forkId: ForkId, seconds: number) {
        const rows = yield* sql<{ accountId: string; month: string; resultTraceId: string }>`
          UPDATE replay_generations SET status = 'failed', error = 'abandoned: no outcome within the replay timeout',
                                        finished_at = now()
          WHERE fork_id = ${forkId} AND status = 'replaying'
            AND created_at < now() - make_interval(secs => ${seconds})
          RETURNING account_id AS "accountId", usage_month AS month, result_trace_id AS "resultTraceId"`
        for (const row of rows) {
          // Its unit goes back unless it got as far as storing a result.
          yield* sql`
            UPDATE replay_usage SET used = GREATEST(0, used - 1)
            WHERE account_id = ${row.accountId} AND month = ${row.month}
              AND NOT EXISTS (SELECT 1 FROM traces WHERE id = ${row.resultTraceId})`
        }
        return rows.length > 0
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { findGeneration, abandonStale, insert, find, list, reserveUnit, refundUnit, startGeneration, finishGeneration } as const
  })
}) {}
