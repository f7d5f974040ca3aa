import { Context, Duration, Effect, Option, Schedule } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { CheckPressure } from "../enforcement/CheckPressure.ts"
import { IngestDemand } from "./IngestDemand.ts"
import { IngestPermits, type Permit } from "./IngestPermits.ts"
import { LagLimit } from "./LagLimit.ts"
import { IngestSaturated } from "#src/domain/Errors"

/** How often refusals answered by the fast path (`refuseFast`) are logged, as one line with their count. */
const REFUSALS_LOG_INTERVAL = Duration.seconds(10)
/** How often the exports admitted at once move while checks wait behind the event loop (LagLimit). */
const LAG_STEP_MS = 100

/**
 * The permit a guarded request holds, as its body reader sees it: the reader reports when the body has arrived
 * whole, and stops (answering 503) when the permit was taken back for another account while it was uploading.
 */
export interface UploadPermit {
  /** The body has arrived whole: from now on the permit cannot be taken back. */
  readonly uploaded: () => void
  /** Calls `onPreempt` at once if the permit was already taken back, else when it is; returns a canceller. */
  readonly onPreempt: (onPreempt: () => void) => () => void
}

/** The ingestion permit of the current request, when it holds one (provided by `IngestGate.guard`). */
export class CurrentUploadPermit extends Context.Tag("tapedeck/CurrentUploadPermit")<
  CurrentUploadPermit,
  UploadPermit
>() {}

/**
 * Bounds concurrent OTLP requests per instance (TAPEDECK_INGEST_MAX_INFLIGHT permits) and shares the permits
 * between accounts by the rule of `IngestPermits`: a free permit goes to whoever asks; when all are taken, an
 * account under its fair share takes back a permit from an upload of an account over its share (answered 503,
 * retryable), and any other asker is refused at once with 503, before its body is read, so overload costs no
 * memory and no database work; so is every export while enforcement checks keep waiting for a lane, and every
 * export past the LagLimit while checks come and the event loop runs late (CheckPressure). With the body deadline
 * and minimum rate (src/http/BodyLimit.ts), an account that opens many slow uploads cannot keep another account's
 * exports out.
 */
export class IngestGate extends Effect.Service<IngestGate>()("tapedeck/IngestGate", {
  scoped: Effect.gen(function* () {
    const { ingestMaxInflight } = yield* AppConfig
    // Enforcement checks come first: while they wait for their decisions, new exports are refused like overload.
    const checks = yield* CheckPressure
    const permits = new IngestPermits(ingestMaxInflight)
    const lagLimit = new LagLimit(ingestMaxInflight, LAG_STEP_MS)
    const demand = new IngestDemand()
    /**
     * Whether checks come first now: all exports are refused, or those past the event loop's limit (below the bound;
     * at the bound the permits' own rule decides, taking back uploads for accounts under their share).
     */
    const checksFirst = () => {
      if (checks.active()) return true
      const now = Date.now()
      const bound = lagLimit.at(now, () => checks.loopLate(demand.exceeded(now)))
      return bound < ingestMaxInflight && permits.inUse >= bound
    }
    const preemptListeners = new WeakMap<Permit, Set<() => void>>()
    let refusedFast = 0
    let preemptions = 0

    const uploadPermit = (permit: Permit): UploadPermit => ({
      uploaded: () => permits.uploaded(permit),
      onPreempt: (onPreempt) => {
        if (permit.preempted) {
          onPreempt()
          return () => {}
        }
        const listeners = preemptListeners.get(permit) ?? new Set()
        preemptListeners.set(permit, listeners.add(onPreempt))
        return () => void listeners.delete(onPreempt)
      }
    })

    /** Runs `effect` holding a permit for `accountId`, or fails with `IngestSaturated` at once. */
    const guard = <A, E, R>(
      accountId: string,
      effect: Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | IngestSaturated, Exclude<R, CurrentUploadPermit>> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.suspend((): Effect.Effect<A, E | IngestSaturated, Exclude<R, CurrentUploadPermit>> => {
          if (checksFirst()) {
            demand.refused(Date.now())
            return Effect.fail(new IngestSaturated({ maxInflight: ingestMaxInflight, by: "checks" }))
          }
          const granted = permits.ask(accountId)
          if (granted === undefined) {
            demand.refused(Date.now())
            return Effect.fail(new IngestSaturated({ maxInflight: ingestMaxInflight, by: "permits" }))
          }
          demand.admitted(Date.now())
          if (granted.preempted !== undefined) {
            // The permit passed to this request already; the upload that held it stops when its reader hears.
            preemptions++
            for (const listener of preemptListeners.get(granted.preempted) ?? []) listener()
          }
          return Effect.ensuring(
            restore(Effect.provideService(effect, CurrentUploadPermit, uploadPermit(granted.permit))),
            Effect.sync(() => permits.release(granted.permit))
          )
        })
      )

    /** Whether every permit is taken now, or checks are shedding ingestion. */
    const saturated = () => permits.inUse >= ingestMaxInflight || checksFirst()

    /** Whether a new export of `accountId` would be admitted now (a free permit, or one it may take back). */
    const admits = (accountId: string) => !checksFirst() && permits.admits(accountId)

    /** Counts a refusal answered without going through `guard`; they are logged in bulk. */
    const refuseFast = () => {
      refusedFast++
      demand.refused(Date.now())
    }

    /** Permits held now by an account (for tests and diagnostics). */
    const heldBy = (accountId: string) => permits.heldBy(accountId)

    yield* Effect.suspend(() => {
      if (refusedFast === 0 && preemptions === 0) return Effect.void
      const parts = [
        refusedFast > 0 ? `refused ${refusedFast} OTLP exports: ingestion saturated` : undefined,
        preemptions > 0 ? `took back ${preemptions} upload permits from accounts over their fair share` : undefined
      ].filter((part) => part !== undefined)
      refusedFast = 0
      preemptions = 0
      return Effect.logWarning(`${parts.join("; ")} (in the last ${Duration.format(REFUSALS_LOG_INTERVAL)})`)
    }).pipe(Effect.repeat(Schedule.spaced(REFUSALS_LOG_INTERVAL)), Effect.forkScoped)

    /** Whether exports are refused because enforcement checks keep waiting (rather than for want of permits). */
    const shedForChecks = () => checksFirst()

    return { guard, saturated, admits, refuseFast, heldBy, shedForChecks, maxInflight: ingestMaxInflight } as const
  }),
  dependencies: [AppConfig.Default, CheckPressure.Default]
}) {}

/** The permit of the current request, if it holds one. */
export const currentUploadPermit = Effect.serviceOption(CurrentUploadPermit).pipe(Effect.map(Option.getOrUndefined))
