import { DateTime, Schema } from "effect"

const MIN = Date.UTC(1970, 0, 1)
const MAX = Date.UTC(10000, 0, 1) - 1

/** RFC 3339 / ISO 8601 extended date-time with a zone: `2026-01-01T00:00:00Z`, `…T00:00:00.123+02:00`. */
export const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/i

/** Epoch milliseconds of an ISO date-time string in range, or undefined. */
export const instantMillis = (text: string): number | undefined => {
  if (!ISO_DATE_TIME.test(text)) return undefined
  const ms = Date.parse(text)
  return ms >= MIN && ms <= MAX ? ms : undefined
}

const IsoDateTime = Schema.String.pipe(
  Schema.pattern(ISO_DATE_TIME, { message: () => "must be an ISO 8601 date-time with a zone, e.g. 2026-01-01T00:00:00Z" })
)

/**
 * An ISO 8601 date-time between 1970 and 9999, in UTC, at millisecond precision.
 * Years 0–99 do not survive the database's `Date` parser, so they are refused here.
 */
export const Instant = IsoDateTime.pipe(
  Schema.compose(Schema.DateTimeUtc),
  Schema.filter((dt) => DateTime.toEpochMillis(dt) >= MIN && DateTime.toEpochMillis(dt) <= MAX, {
    message: () => "must be an ISO 8601 date-time between 1970 and 9999"
  })
).annotations({
  identifier: "Instant",
  arbitrary: () => (fc) => fc.integer({ min: MIN, max: MAX }).map((ms) => DateTime.unsafeMake(ms))
})
export type Instant = typeof Instant.Type

/** The same instant read from a `timestamptz` column (a JS `Date` from both drivers). */
export const InstantFromDate = Schema.DateTimeUtcFromDate
