import { Effect } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { EventLoopLag } from "../platform/EventLoopLag.ts"
import { WindowCount } from "../platform/WindowCount.ts"

/** How long ingestion stays shed once check pressure is sustained: long enough not to flap export by export. */
const SHED_FOR_MS = 1000
/**
 * Checks within the window that make a late event loop theirs to protect. A late loop costs each check a few
 * milliseconds: worth slowing every account's ingestion for when an instance serves checks by the hundred a second,
 * not for one account's few (whose agents ride it out), so that an account's checks never cut another's exports.
 */
const MIN_CHECKS_FOR_LAG = 100
/**
 * Slow checks within the last second (the window checks are counted over) before ingestion is shed. An agent's checks
 * come a few at a time (a step, its parallel tool calls): a handful of slow ones is a burst, not an instance short of
 * lanes. It takes this many, and at least half of the window's checks, for the wait to be the instance's state rather
 * than one moment's.
 */
const MIN_SLOW_IN_WINDOW = 16

/**
 * Whether enforcement checks are kept waiting, by either of two things ingestion competes for (IngestGate refuses
 * exports with 503 and Retry-After accordingly: checks come first under overload, and an exporter retries later
 * where an agent would have waited before its next step):
 * - database lanes (`active`): checks keep waiting for a lane (queued behind the batch statements in flight) longer
 *   than TAPEDECK_ENFORCEMENT_SHED_INGEST_MS. Only sustained pressure counts (MIN_SLOW_IN_WINDOW slow checks within
 *   the window, at least half of them): one account's occasional slow check must not refuse every account's
 *   exports. The queue wait, not a check's whole time, and not the time a check waits behind its own run's earlier
 *   checks (CheckBatcher leaves that out): one slow statement alone sheds nothing.
 * - the event loop (`loopLate`): while checks come (MIN_CHECKS_FOR_LAG within the window), the loop runs its timers
 *   later than TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS on average (EventLoopLag; half of it while exports come faster
 *   than they are taken). Every check waits that long before it is read and again after its statement, however free
 *   the lanes: JavaScript work is in the way.
 */
export class CheckPressure extends Effect.Service<CheckPressure>()("tapedeck/CheckPressure", {
  effect: Effect.gen(function* () {
    const { enforcementShedIngestMs, enforcementShedIngestLagMs } = yield* AppConfig
    const lag = yield* EventLoopLag
    /** Checks' queue waits of the last second: all of them, and those over the threshold. */
    const all = new WindowCount()
    const slow = new WindowCount()
    let shedUntil = 0
    /**
     * Until when another instance's checks keep waiting for a lane, or behind its late event loop (ClusterPressure):
     * ingestion here steps aside for them as for this instance's own.
     */
    let lanesElsewhereUntil = 0
    let loopElsewhereUntil = 0

    /** A check waited `ms` in the queue for a lane before its batch statement (or before being dropped). */
    const observe = (ms: number) => {
      const at = Date.now()
      all.add(at)
      if (enforcementShedIngestMs <= 0 || ms <= enforcementShedIngestMs) return
      slow.add(at)
      const slowNow = slow.total(at)
      if (slowNow >= MIN_SLOW_IN_WINDOW && 2 * slowNow >= all.total(at)) shedUntil = at + SHED_FOR_MS
    }

    /**
     * True while ingestion should be shed, for this instance's checks or another's (synchronous: the HTTP layer asks
     * it before reading a body).
     */
    const active = () => {
      const now = Date.now()
      return shedUntil > now || lanesElsewhereUntil > now
    }

    /**
     * True while checks come and the event loop runs late: later than TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS, or than
     * half of it while exports come faster than the instance takes them (`exportsExceed`, IngestDemand): most of them
     * wait for their retry then anyway, and what the instance still admits is what the checks wait behind.
     */
    const loopLate = (exportsExceed: boolean) => loopLateHere(exportsExceed) || loopElsewhereUntil > Date.now()
    const loopLateHere = (exportsExceed: boolean) => {
      if (enforcementShedIngestLagMs <= 0) return false
      const limit = exportsExceed ? enforcementShedIngestLagMs / 2 : enforcementShedIngestLagMs
      return all.total(Date.now()) >= MIN_CHECKS_FOR_LAG && lag.recentMs() > limit
    }

    /**
     * What keeps this instance's own checks waiting now, for ClusterPressure to tell the others: its lanes (the rule
     * of `active`), its late event loop (the rule of `loopLate`), or nothing. What other instances said is left out.
     */
    const pressedHere = (): "lanes" | "loop" | undefined =>
      shedUntil > Date.now() ? "lanes" : loopLateHere(false) ? "loop" : undefined

    /**
     * Another instance's checks keep waiting for its lanes or behind its loop: ingestion here steps aside until
     * `until`, unless the rule is off here (its setting 0). Whether it was heeded.
     */
    const pressedElsewhere = (by: "lanes" | "loop", until: number) => {
      if (by === "lanes" && enforcementShedIngestMs > 0) lanesElsewhereUntil = Math.max(lanesElsewhereUntil, until)
      else if (by === "loop" && enforcementShedIngestLagMs > 0) loopElsewhereUntil = Math.max(loopElsewhereUntil, until)
      else return false
      return true
    }

    return { observe, active, loopLate, pressedHere, pressedElsewhere } as const
  }),
  dependencies: [AppConfig.Default, EventLoopLag.Default]
}) {}
