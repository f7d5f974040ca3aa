import { Duration, Effect, Schedule, Schema } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { CheckPressure } from "../enforcement/CheckPressure.ts"

/** Every ingestion permit is taken: the caller should retry later (503 with Retry-After). */
export class IngestSaturated extends Schema.TaggedError<IngestSaturated>()("IngestSaturated", {
  maxInflight: Schema.Number
}) {}

/** How often refusals answered by the fast path (`refuseFast`) are logged, as one line with their count. */
const REFUSALS_LOG_INTERVAL = Duration.seconds(10)

/**
 * Bounds concurrent OTLP requests per instance (TAPEDECK_INGEST_MAX_INFLIGHT). A request over the bound is
 * refused at once, before its body is read, so overload costs no memory and no database work. The count is a
 * plain number so the HTTP layer can ask `saturated()` synchronously and refuse before any other work.
 */
export class IngestGate extends Effect.Service<IngestGate>()("tapedeck/IngestGate", {
  scoped: Effect.gen(function*() {
    const { ingestMaxInflight } = yield* AppConfig
    // Enforcement checks come first: while they wait for their decisions, new exports are refused like overload.
    const checks = yield* CheckPressure
    let inflight = 0
    let refusedFast = 0

    const release = Effect.sync(() => void inflight--)
    const guard = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | IngestSaturated, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend((): Effect.Effect<A, E | IngestSaturated, R> => {
          if (inflight >= ingestMaxInflight || checks.active()) return Effect.fail(new IngestSaturated({ maxInflight: ingestMaxInflight }))
          inflight++
          return Effect.ensuring(restore(effect), release)
        })
      )

    /** Whether a new export would be refused now. */
    const saturated = () => inflight >= ingestMaxInflight || checks.active()

    /** Counts a refusal answered without going through `guard`; they are logged in bulk. */
    const refuseFast = () => void refusedFast++

    yield* Effect.suspend(() => {
      if (refusedFast === 0) return Effect.void
      const n = refusedFast
      refusedFast = 0
      return Effect.logWarning(`refused ${n} OTLP exports in the last ${Duration.format(REFUSALS_LOG_INTERVAL)}: ingestion saturated`)
    }).pipe(Effect.repeat(Schedule.spaced(REFUSALS_LOG_INTERVAL)), Effect.forkScoped)

    return { guard, saturated, refuseFast, maxInflight: ingestMaxInflight } as const
  }),
  dependencies: [AppConfig.Default, CheckPressure.Default]
}) {}
