import { DateTime, Schema } from "effect"

const MIN = Date.UTC(1970, 0, 1)
const MAX = Date.UTC(10000, 0, 1) - 1

/** RFC 3339 / ISO 8601 extended date-time with a zone: `2026-01-01T00:00:00Z`, `…T00:00:00.123+02:00`. */
export const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/i

/**
 * Epoch milliseconds of an ISO date-time string, or undefined when it is malformed, names a day or time
 * that does not exist (`2026-02-30`, `T24:00`: `Date.parse` would roll them over, PostgreSQL refuses
 * them) or falls outside 1970–9999.
 */
export const instantMillis = (text: string): number | undefined => {
  const m = ISO_DATE_TIME.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? "0"].map(Number) as [
    number, number, number, number, number, number
  ]
  const calendar = new Date(Date.UTC(year, month - 1, day))
  if (
    calendar.getUTCFullYear() !== year || calendar.getUTCMonth() !== month - 1 || calendar.getUTCDate() !== day ||
    hour > 23 || minute > 59 || second > 59 || Number(m[7] ?? 0) > 23 || Number(m[8] ?? 0) > 59
  ) return undefined
  const ms = Date.parse(text)
  return ms >= MIN && ms <= MAX ? ms : undefined
}

const IsoDateTime = Schema.String.pipe(
  Schema.filter((s) => instantMillis(s) !== undefined, {
    message: () => "must be an ISO 8601 date-time with a zone between 1970 and 9999, e.g. 2026-01-01T00:00:00Z"
  })
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
