import { SqlClient } from "@effect/sql"
import { Cause, Context, Effect } from "effect"
import type { AccountId, TraceId } from "#src/domain/Ids"
import { JobFailed } from "#src/domain/Errors"
import type { TerminalTrace } from "../events/TerminalTraceHook.ts"
import type { JobHandler } from "../jobs/JobHandlers.ts"
import { JobQueue } from "../jobs/JobQueue.ts"
import { Traces } from "../traces/Traces.ts"

/** One terminal trace handed to a sink. */
export interface SinkDelivery {
  /** The same for every attempt at this trace and this sink: a sink that stores it can skip a repeat. */
  readonly idempotencyKey: string
  readonly accountId: AccountId
  readonly traceId: string
  readonly status: "completed" | "failed"
  /** The trace as GET /api/v1/traces/{id} answers it (its spans included). */
  readonly trace: Readonly<Record<string, unknown>>
  /** 1 for the first attempt. */
  readonly attempt: number
}

/**
 * An extension called for every trace that becomes terminal, through the durable job queue: at least once (a
 * delivery may repeat: `idempotencyKey`), retried with backoff when it fails, dead-lettered after
 * TAPEDECK_JOB_MAX_ATTEMPTS attempts; its failures are in GET /api/v1/diagnostics (`sinks`).
 */
export interface TraceSink {
  readonly name: string
  readonly deliver: (delivery: SinkDelivery) => Effect.Effect<void, unknown>
}

/** The installed sinks; none by default (terminal traces then queue no sink jobs). */
export class TraceSinks extends Context.Reference<TraceSinks>()("tapedeck/TraceSinks", {
  defaultValue: (): ReadonlyArray<TraceSink> => []
}) {}

/** A terminal-trace consumer: one `trace.sink` job per terminal trace and installed sink, in its trace's account. */
export const traceSinkConsumer = Effect.gen(function* () {
  const sinks = yield* TraceSinks
  const jobs = yield* JobQueue
  return (traces: ReadonlyArray<TerminalTrace>) =>
    sinks.length === 0
      ? Effect.void
      : Effect.forEach(
          traces,
          (trace) =>
            jobs.enqueueMany(
              trace.accountId,
              "trace.sink",
              sinks.map((sink) => ({ traceId: trace.traceId, status: trace.status, sink: sink.name }))
            ),
          { discard: true }
        )
})

/**
 * Delivers one trace to one sink. The trace is read as the job's account, so a sink never receives another
 * account's trace; a trace deleted before its delivery is not delivered.
 */
export const traceSinkHandler = Effect.gen(function* () {
  const sinks = yield* TraceSinks
  const traces = yield* Traces
  const handler: JobHandler<"trace.sink"> = (job) =>
    Effect.gen(function* () {
      const sink = sinks.find((s) => s.name === job.payload.sink)
      if (sink === undefined)
        return yield* new JobFailed({ reason: `no trace sink named ${JSON.stringify(job.payload.sink)} is installed` })
      const text = yield* traces
        .getJson(job.accountId, job.payload.traceId as TraceId)
        .pipe(Effect.catchTag("TraceNotFound", () => Effect.succeed(undefined)))
      if (text === undefined) return
      yield* sink
        .deliver({
          idempotencyKey: `${job.payload.traceId}:${sink.name}`,
          accountId: job.accountId,
          traceId: job.payload.traceId,
          status: job.payload.status,
          trace: JSON.parse(text),
          attempt: job.attempts
        })
        .pipe(
          Effect.catchAllCause((cause) => {
            const reason = `trace sink ${JSON.stringify(sink.name)} failed: ${failureText(cause)}`
            return Effect.logWarning(reason).pipe(Effect.zipRight(Effect.fail(new JobFailed({ reason }))))
          })
        )
    })
  return handler
})

const failureText = (cause: Cause.Cause<unknown>): string => {
  const e = Cause.squash(cause)
  const text = String(
    e instanceof Error ? e.message : typeof e === "object" && e !== null && "message" in e ? e.message : e
  )
  return text.length > 500 ? `${text.slice(0, 500)}…` : text
}

/** Per installed sink, for the account: jobs waiting, attempts failed so far, deliveries given up, the last error. */
export const sinkDiagnostics = Effect.fn("TraceSinks.diagnostics")(function* (accountId: AccountId) {
  const sinks = yield* TraceSinks
  if (sinks.length === 0) return []
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ sink: string; pending: number; failing: number; dead: number; last_error: string | null }>`
    SELECT payload->>'sink' AS sink,
      count(*) FILTER (WHERE status IN ('queued', 'running'))::int AS pending,
      count(*) FILTER (WHERE status IN ('queued', 'running') AND error IS NOT NULL)::int AS failing,
      count(*) FILTER (WHERE status = 'dead_letter')::int AS dead,
      (array_agg(error ORDER BY updated_at DESC) FILTER (WHERE error IS NOT NULL))[1] AS last_error
    FROM jobs WHERE account_id = ${accountId} AND kind = 'trace.sink'
    GROUP BY 1`.pipe(Effect.orDie)
  const byName = new Map(rows.map((r) => [r.sink, r]))
  return sinks.map((s) => {
    const r = byName.get(s.name)
    return {
      name: s.name,
      pending_jobs: r?.pending ?? 0,
      failing_jobs: r?.failing ?? 0,
      dead_jobs: r?.dead ?? 0,
      last_error: r?.last_error ?? null
    }
  })
})
