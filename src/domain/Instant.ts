import { DateTime, Schema } from "effect"

const MIN = Date.UTC(1970, 0, 1)
const MAX = Date.UTC(10000, 0, 1) - 1

const inRange = (dt: DateTime.Utc) => {
  const ms = DateTime.toEpochMillis(dt)
  return ms >= MIN && ms <= MAX
}

/**
 * An ISO 8601 date-time between 1970 and 9999, in UTC, at millisecond precision.
 * Years 0–99 do not survive the database's `Date` parser, so they are refused here.
 */
export const Instant = Schema.DateTimeUtc.pipe(
  Schema.filter(inRange, { message: () => "must be an ISO 8601 date-time between 1970 and 9999" })
).annotations({
  identifier: "Instant",
  arbitrary: () => (fc) => fc.integer({ min: MIN, max: MAX }).map((ms) => DateTime.unsafeMake(ms))
})
export type Instant = typeof Instant.Type

/** The same instant read from a `timestamptz` column (a JS `Date` from both drivers). */
export const InstantFromDate = Schema.DateTimeUtcFromDate
