import { Context, Effect, Layer } from "effect"
import type { AccountId, TraceId } from "#src/domain/Ids"
import type { TraceStatus } from "#src/domain/Trace"
import type { JobBatchHandler, JobHandler, JobOf } from "../jobs/JobHandlers.ts"
import type { JobFailed } from "#src/domain/Errors"

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

/** The terminal trace a job names. */
const terminalTrace = (job: JobOf<"trace.terminal">): TerminalTrace => ({
  accountId: job.accountId,
  traceId: job.payload.traceId as TraceId,
  status: job.payload.status
})

/**
 * The job handlers for `trace.terminal`: one job, or a batch of them at once (every consumer runs once for the whole
 * batch, so a burst of terminal traces costs a few statements per batch instead of several per trace).
 */
export const terminalTraceHandlers = Effect.gen(function*() {
  const consumers = yield* TerminalTraceConsumers
  const consume = (traces: ReadonlyArray<TerminalTrace>) =>
    Effect.forEach(consumers, (consumer) => consumer(traces), { discard: true })
  const single: JobHandler<"trace.terminal"> = (job) => consume([terminalTrace(job)])
  const batch: JobBatchHandler<"trace.terminal"> = (jobs) => consume(jobs.map(terminalTrace))
  return { single, batch } as const
})
