import { Effect } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

/** How long ingestion stays shed after a check waited too long: long enough not to flap export by export. */
const SHED_FOR_MS = 1000

/**
 * Whether enforcement checks are waiting for their decisions longer than TAPEDECK_ENFORCEMENT_SHED_INGEST_MS. While
 * they are, ingestion refuses new exports (IngestGate answers 503 with Retry-After): checks come first under
 * overload, and an exporter retries later where an agent would have waited before its next step.
 */
export class CheckPressure extends Effect.Service<CheckPressure>()("tapedeck/CheckPressure", {
  effect: Effect.gen(function*() {
    const { enforcementShedIngestMs } = yield* AppConfig
    let shedUntil = 0

    /** A check's store work took `ms` from being queued to its answer. */
    const observe = (ms: number) => {
      if (enforcementShedIngestMs > 0 && ms > enforcementShedIngestMs) shedUntil = Date.now() + SHED_FOR_MS
    }

    /** True while ingestion should be shed (synchronous: the HTTP layer asks it before reading a body). */
    const active = () => shedUntil > Date.now()

    return { observe, active } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
