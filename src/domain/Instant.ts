import { DateTime, Schema } from "effect"

const MIN = Date.UTC(1970, 0, 1)
const MAX = Date.UTC(10000, 0, 1) - 1

/** RFC 3339 / ISO 8601 extended date-time with a zone: `2026-01-01T00:00:00Z`, `…T00:00:00.123+02:00`. */
export const ISO_DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/i

const digit = (text: string, i: number) => {
  const c = text.charCodeAt(i) - 48
  return c >= 0 && c <= 9 ? c : NaN
}
const digits2 = (text: string, i: number) => digit(text, i) * 10 + digit(text, i + 1)
const isLeap = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

/**
 * `instantMillis` of the form every client library prints, `YYYY-MM-DDTHH:MM:SSZ` or `…SS.sssZ` (what
 * `toISOString` gives), read digit by digit: undefined for anything else, which the general parser then reads.
 * A request carries two of these per span; the regular expression and `Date.parse` cost five times as much.
 */
const canonicalMillis = (text: string): number | undefined => {
  const n = text.length
  if (n !== 20 && n !== 24) return undefined
  if (
    text.charCodeAt(4) !== 45 ||
    text.charCodeAt(7) !== 45 ||
    text.charCodeAt(10) !== 84 ||
    text.charCodeAt(13) !== 58 ||
    text.charCodeAt(16) !== 58 ||
    text.charCodeAt(n - 1) !== 90
  )
    return undefined
  const year = digits2(text, 0) * 100 + digits2(text, 2)
  const month = digits2(text, 5)
  const day = digits2(text, 8)
  const hour = digits2(text, 11)
  const minute = digits2(text, 14)
  const second = digits2(text, 17)
  let millis = 0
  if (n === 24) {
    if (text.charCodeAt(19) !== 46) return undefined
    millis = digit(text, 20) * 100 + digits2(text, 21)
  }
  // NaN (a non-digit) fails every comparison. Years before 100 would be read by Date.UTC as 19xx.
  if (
    !(
      year >= 1970 &&
      month >= 1 &&
      month <= 12 &&
      day >= 1 &&
      hour <= 23 &&
      minute <= 59 &&
      second <= 59 &&
      millis >= 0
    )
  ) {
    return undefined
  }
  if (day > (month === 2 && isLeap(year) ? 29 : DAYS_IN_MONTH[month - 1]!)) return undefined
  const ms = Date.UTC(year, month - 1, day, hour, minute, second, millis)
  return ms >= MIN && ms <= MAX ? ms : undefined
}

/**
 * Epoch milliseconds of an ISO date-time string, or undefined when it is malformed, names a day or time
 * that does not exist (`2026-02-30`, `T24:00`: `Date.parse` would roll them over, PostgreSQL refuses
 * them) or falls outside 1970–9999.
 */
export const instantMillis = (text: string): number | undefined => canonicalMillis(text) ?? generalMillis(text)

/** The text an instant was read from, kept when it is exactly what `toISOString` prints for it. */
const printedAs = new WeakMap<DateTime.Utc, string>()

/**
 * The instant an ISO date-time string names (see `instantMillis`), or undefined. When the text is already in
 * `toISOString`'s form (`…T00:00:00.000Z`), `formatInstant` gives it back instead of printing it again: ingestion
 * reads and writes two of these per span.
 */
export const instantOf = (text: string): DateTime.Utc | undefined => {
  const canonical = canonicalMillis(text)
  const ms = canonical ?? generalMillis(text)
  if (ms === undefined) return undefined
  const instant = DateTime.unsafeMake(ms)
  if (canonical !== undefined && text.length === 24) printedAs.set(instant, text)
  return instant
}

/** `DateTime.formatIso`: the instant as `toISOString` prints it. */
export const formatInstant = (instant: DateTime.Utc): string => printedAs.get(instant) ?? DateTime.formatIso(instant)

// Instants printed in a row mostly share their minute (the spans of one export): its "YYYY-MM-DDTHH:MM:" is kept.
let printedMinute = Number.NaN
let minutePrefix = ""

/** `new Date(ms).toISOString()` for whole milliseconds from 1970 through 9999, printing the minute once for its neighbours. */
export const isoOfMillis = (ms: number): string => {
  if (!Number.isInteger(ms) || ms < MIN || ms > MAX) return new Date(ms).toISOString()
  const minute = Math.floor(ms / 60_000)
  if (minute !== printedMinute) {
    minutePrefix = new Date(minute * 60_000).toISOString().slice(0, 17)
    printedMinute = minute
  }
  const secondsAndMillis = String(100_000 + ms - minute * 60_000) // "1ssmmm"
  return `${minutePrefix}${secondsAndMillis.slice(1, 3)}.${secondsAndMillis.slice(3)}Z`
}

const generalMillis = (text: string): number | undefined => {
  const m = ISO_DATE_TIME.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? "0"].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number
  ]
  const calendar = new Date(Date.UTC(year, month - 1, day))
  if (
    calendar.getUTCFullYear() !== year ||
    calendar.getUTCMonth() !== month - 1 ||
    calendar.getUTCDate() !== day ||
    hour > 23 ||
    minute > 59 ||
    second > 59 ||
    Number(m[7] ?? 0) > 23 ||
    Number(m[8] ?? 0) > 59
  )
    return undefined
  const ms = Date.parse(text)
  return ms >= MIN && ms <= MAX ? ms : undefined
}

const IsoDateTime = Schema.String.pipe(
  Schema.filter((s) => instantMillis(s) !== undefined, {
    message: () => "must be an ISO 8601 date-time with a zone between 1970 and 9999, e.g. 2026-01-01T00:00:00Z"
  }),
  // The API reference's text for every instant (this is the side it documents). In the JSON Schema annotation,
  // not `description`: validation messages are written from that one.
  Schema.annotations({
    jsonSchema: {
      description:
        "An instant as an ISO 8601 date-time with a time zone (e.g. 2026-06-01T09:30:00.000Z), between 1970 and 9999"
    }
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
