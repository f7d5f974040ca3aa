import { Context, Effect, Either, Layer, Schema } from "effect"
import type { AccountId, TraceId } from "#src/domain/Ids"
import type { TraceStatus } from "#src/domain/Trace"
import { type JobBatchHandler, type JobHandler } from "../jobs/JobHandlers.ts"
import type { ClaimedJob } from "../jobs/JobQueue.ts"
import { JobFailed } from "#src/domain/Errors"

export const TERMINAL_TRACE_JOB = "trace.terminal"

export const TerminalTracePayload = Schema.Struct({
  traceId: Schema.UUID,
  status: Schema.Literal("completed", "failed")
})

export interface TerminalTrace {
  readonly accountId: AccountId
  readonly traceId: TraceId
  readonly status: Exclude<TraceStatus, "running">
}

/**
 * What runs when traces become terminal (detection, evaluation rules), given a batch of them (one or many); each
 * consumer must be idempotent.
 */
export class TerminalTraceConsumers extends Context.Tag("tapedeck/TerminalTraceConsumers")<
  TerminalTraceConsumers,
  ReadonlyArray<(traces: ReadonlyArray<TerminalTrace>) => Effect.Effect<void, JobFailed>>
>() {}

/** No consumers yet: detection and evaluation rules plug in here. */
export const TerminalTraceConsumersNone = Layer.succeed(TerminalTraceConsumers, [])

const decodePayload = Schema.decodeUnknownEither(TerminalTracePayload)

/** The terminal trace a job names, or JobFailed for a malformed payload. */
const terminalTrace = (job: ClaimedJob) =>
  Either.match(decodePayload(job.payload), {
    onLeft: () => Effect.fail(new JobFailed({ reason: "malformed trace.terminal payload" })),
    onRight: (payload) =>
      Effect.succeed<TerminalTrace>({ accountId: job.accountId, traceId: payload.traceId as TraceId, status: payload.status })
  })

/**
 * The job handlers for `trace.terminal`: one job, or a batch of them at once (every consumer runs once for the whole
 * batch, so a burst of terminal traces costs a few statements per batch instead of several per trace).
 */
export const terminalTraceHandlers = Effect.gen(function*() {
  const consumers = yield* TerminalTraceConsumers
  const consume = (traces: ReadonlyArray<TerminalTrace>) =>
    Effect.forEach(consumers, (consumer) => consumer(traces), { discard: true })
  const single: JobHandler = (job) => Effect.flatMap(terminalTrace(job), (trace) => consume([trace]))
  const batch: JobBatchHandler = (jobs) => Effect.flatMap(Effect.forEach(jobs, terminalTrace), consume)
  return { single, batch } as const
})
