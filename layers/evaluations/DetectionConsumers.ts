import { Effect, Layer } from "effect"
import { TerminalTraceConsumers } from "../events/TerminalTraceHook.ts"
import { traceSinkConsumer } from "../extensions/TraceSinks.ts"
import { JobQueue } from "../jobs/JobQueue.ts"
import { Detection } from "./Detection.ts"
import { EvalRules } from "./EvalRules.ts"

/**
 * What a terminal trace triggers: detection (insights), then the account's eval rules. Both are idempotent,
 * so a retried `trace.terminal` job neither duplicates insights nor queues runs twice.
 */
export const TerminalTraceConsumersLive = Layer.effect(
  TerminalTraceConsumers,
  Effect.gen(function* () {
    const detection = yield* Detection
    const rules = yield* EvalRules
    const sinks = yield* traceSinkConsumer
    return [(traces) => detection.runMany(traces).pipe(Effect.asVoid), (traces) => rules.applyMany(traces), sinks]
  })
).pipe(Layer.provide([Detection.Default, EvalRules.Default, JobQueue.Default]))
