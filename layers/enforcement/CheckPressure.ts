import { Effect } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

/** How long ingestion stays shed once check pressure is sustained: long enough not to flap export by export. */
const SHED_FOR_MS = 1000
/** The sliding window over which checks' queue waits are counted, in buckets of a tenth of it. */
const WINDOW_MS = 1000
const BUCKETS = 10
/**
 * Slow checks within the window before ingestion is shed. An agent's checks come a few at a time (a step, its
 * parallel tool calls): a handful of slow ones is a burst, not an instance short of lanes. It takes this many,
 * and at least half of the window's checks, for the wait to be the instance's state rather than one moment's.
 */
const MIN_SLOW_IN_WINDOW = 16

/**
 * Whether enforcement checks keep waiting for a lane (queued behind the batch statements in flight) longer than
 * TAPEDECK_ENFORCEMENT_SHED_INGEST_MS. While they do, ingestion refuses new exports (IngestGate answers 503 with
 * Retry-After): checks come first under sustained overload, and an exporter retries later where an agent would
 * have waited before its next step. Only sustained pressure counts (MIN_SLOW_IN_WINDOW slow checks within the
 * window, at least half of them): one account's occasional slow check must not refuse every account's exports. The
 * queue wait, not a check's whole time, and not the time a check waits behind its own run's earlier checks
 * (CheckBatcher leaves that out): one slow statement alone sheds nothing.
 */
export class CheckPressure extends Effect.Service<CheckPressure>()("tapedeck/CheckPressure", {
  effect: Effect.gen(function* () {
    const { enforcementShedIngestMs } = yield* AppConfig
    const bucketMs = WINDOW_MS / BUCKETS
    const slow = new Array<number>(BUCKETS).fill(0)
    const all = new Array<number>(BUCKETS).fill(0)
    /** The bucket (as a count of bucket lengths since the epoch) that index `current % BUCKETS` holds. */
    let current = 0
    let shedUntil = 0

    /** Moves the window to `at`, emptying the buckets it leaves behind. */
    const advance = (at: number) => {
      const bucket = Math.floor(at / bucketMs)
      if (bucket <= current) return
      for (let b = Math.max(current + 1, bucket - BUCKETS + 1); b <= bucket; b++) {
        slow[b % BUCKETS] = 0
        all[b % BUCKETS] = 0
      }
      current = bucket
    }

    /** A check waited `ms` in the queue for a lane before its batch statement (or before being dropped). */
    const observe = (ms: number) => {
      if (enforcementShedIngestMs <= 0) return
      const at = Date.now()
      advance(at)
      all[current % BUCKETS]!++
      if (ms <= enforcementShedIngestMs) return
      slow[current % BUCKETS]!++
      const slowNow = slow.reduce((a, b) => a + b, 0)
      if (slowNow >= MIN_SLOW_IN_WINDOW && 2 * slowNow >= all.reduce((a, b) => a + b, 0)) shedUntil = at + SHED_FOR_MS
    }

    /** True while ingestion should be shed (synchronous: the HTTP layer asks it before reading a body). */
    const active = () => shedUntil > Date.now()

    return { observe, active } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
