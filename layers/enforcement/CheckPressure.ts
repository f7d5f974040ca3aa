import { Effect } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

/** How long ingestion stays shed after a check waited too long: long enough not to flap export by export. */
const SHED_FOR_MS = 1000

/**
 * Whether enforcement checks wait for their turn (queued behind the batch statements in flight) longer than
 * TAPEDECK_ENFORCEMENT_SHED_INGEST_MS. While they do, ingestion refuses new exports (IngestGate answers 503 with
 * Retry-After): checks come first under overload, and an exporter retries later where an agent would have waited
 * before its next step. The queue wait, not a check's whole time: one slow statement alone sheds nothing.
 */
export class CheckPressure extends Effect.Service<CheckPressure>()("tapedeck/CheckPressure", {
  effect: Effect.gen(function*() {
    const { enforcementShedIngestMs } = yield* AppConfig
    let shedUntil = 0

    /** A check waited `ms` in the queue before its batch statement (or before being dropped, answered already). */
    const observe = (ms: number) => {
      if (enforcementShedIngestMs > 0 && ms > enforcementShedIngestMs) shedUntil = Date.now() + SHED_FOR_MS
    }

    /** True while ingestion should be shed (synchronous: the HTTP layer asks it before reading a body). */
    const active = () => shedUntil > Date.now()

    return { observe, active } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
