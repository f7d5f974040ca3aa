import { Context, Effect, Layer, Schema } from "effect"
import type { AccountId, TraceId } from "#src/domain/Ids"
import type { TraceStatus } from "#src/domain/Trace"
import { JobFailed, type JobHandler } from "../jobs/JobHandlers.ts"

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

/** What runs when a trace becomes terminal (detection, evaluation rules); each consumer must be idempotent. */
export class TerminalTraceConsumers extends Context.Tag("tapedeck/TerminalTraceConsumers")<
  TerminalTraceConsumers,
  ReadonlyArray<(trace: TerminalTrace) => Effect.Effect<void, JobFailed>>
>() {}

/** No consumers yet: detection and evaluation rules plug in here. */
export const TerminalTraceConsumersNone = Layer.succeed(TerminalTraceConsumers, [])

/** The job handler for `trace.terminal`: runs every consumer, in order. */
export const terminalTraceHandler = Effect.gen(function*() {
  const consumers = yield* TerminalTraceConsumers
  const handler: JobHandler = (job) =>
    Schema.decodeUnknown(TerminalTracePayload)(job.payload).pipe(
      Effect.mapError(() => new JobFailed({ reason: "malformed trace.terminal payload" })),
      Effect.flatMap((payload) => {
        const trace = {
          accountId: job.accountId,
          traceId: payload.traceId as TraceId,
          status: payload.status
        } satisfies TerminalTrace
        return Effect.forEach(consumers, (consume) => consume(trace), { discard: true })
      })
    )
  return handler
})
