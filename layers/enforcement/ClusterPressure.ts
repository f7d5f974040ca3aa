import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Schedule, Stream } from "effect"
import { holdBackground } from "../jobs/Foreground.ts"
import { CheckPressure } from "./CheckPressure.ts"

/** The NOTIFY channel an instance whose checks keep waiting tells the others on; the payload is the sender's id. */
export const CHECK_PRESSURE_CHANNEL = "tapedeck_check_pressure"
/** How often an instance looks whether its checks keep waiting, and at most how often it says so. */
const LOOK_EVERY_MS = 100
const SAY_AT_MOST_EVERY_MS = 250
/** How long a notice holds the others' ingestion and background work: as long as a local shed lasts. */
const HOLD_MS = 1000

/**
 * Checks first across instances. CheckPressure makes an instance's ingestion step aside while its own checks keep
 * waiting; but another instance's exports and background work (search indexing, evaluations) load the same
 * PostgreSQL and, with several workers on one machine (TAPEDECK_WORKERS), the same cores, and that instance does not
 * see the checks. So an instance whose checks keep waiting says why on CHECK_PRESSURE_CHANNEL (at most every
 * SAY_AT_MOST_EVERY_MS while it lasts), and for HOLD_MS every other instance takes it as its own: for "lanes" (checks
 * waiting for a database lane) it refuses every export (503, Retry-After), for "loop" (checks by the hundred a second
 * behind a late event loop) it narrows the exports it admits at once as LagLimit does; and either way it holds its
 * background work. Only what CheckPressure's rules count as sustained is said, never what was heard (no echo), so one
 * account's few slow checks refuse nobody's exports; a rule turned off (its setting 0) is neither said nor heeded.
 * Embedded PGlite is one process: nothing to tell.
 */
export const ClusterPressureLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isNone(pg)) return
    const sql = yield* SqlClient.SqlClient
    const pressure = yield* CheckPressure
    const self = crypto.randomUUID()
    yield* pg.value.listen(CHECK_PRESSURE_CHANNEL).pipe(
      Stream.runForEach((notice) =>
        Effect.sync(() => {
          const [sender, by] = notice.split(":")
          if (sender === self || (by !== "lanes" && by !== "loop")) return
          const until = Date.now() + HOLD_MS
          if (pressure.pressedElsewhere(by, until)) holdBackground(until)
        })
      ),
      Effect.tapErrorCause((cause) => Effect.logWarning("check pressure listener stopped; reconnecting", cause)),
      Effect.retry(Schedule.spaced("1 second")),
      Effect.forkScoped
    )
    let saidAt = 0
    yield* Effect.suspend(() => {
      const now = Date.now()
      const by = pressure.pressedHere()
      if (by === undefined) return Effect.void
      // This instance's own background work steps aside too (its job worker also yields to the checks in flight).
      holdBackground(now + HOLD_MS)
      if (now - saidAt < SAY_AT_MOST_EVERY_MS) return Effect.void
      saidAt = now
      return sql`SELECT pg_notify(${CHECK_PRESSURE_CHANNEL}, ${`${self}:${by}`})`.pipe(Effect.ignore)
    }).pipe(Effect.repeat(Schedule.spaced(`${LOOK_EVERY_MS} millis`)), Effect.forkScoped)
  })
)
