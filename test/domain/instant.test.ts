import { describe, expect, test } from "bun:test"
import { DateTime, FastCheck as fc } from "effect"
import { formatInstant, ISO_DATE_TIME, instantMillis, instantOf, isoOfMillis } from "#src/domain/Instant"

/** The last millisecond of year 9999, the last instant the service stores. */
const LAST_MS = Date.UTC(10000, 0, 1) - 1

/** The definition instantMillis must keep: the ISO regular expression, a calendar check, then Date.parse. */
const reference = (text: string): number | undefined => {
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
  return ms >= 0 && ms <= LAST_MS ? ms : undefined
}

const pad = (n: number, width: number) => String(n).padStart(width, "0")
/** Strings of the canonical shape with every field drawn past its valid range, and a sprinkle of wrong characters. */
const canonicalish = fc
  .tuple(
    fc.integer({ min: 0, max: 9999 }),
    fc.integer({ min: 0, max: 13 }),
    fc.integer({ min: 0, max: 32 }),
    fc.integer({ min: 0, max: 25 }),
    fc.integer({ min: 0, max: 61 }),
    fc.integer({ min: 0, max: 61 }),
    fc.option(fc.integer({ min: 0, max: 999 })),
    fc.option(fc.tuple(fc.nat(23), fc.char()))
  )
  .map(([y, mo, d, h, mi, s, ms, typo]) => {
    const text = `${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)}T${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}${ms === null ? "" : `.${pad(ms, 3)}`}Z`
    return typo === null ? text : text.slice(0, typo[0]) + typo[1] + text.slice(typo[0] + 1)
  })

/** An instant of 1970–9999 printed by `toISOString` and then rewritten by `form` (another way of writing it). */
const printed = (form: (iso: string) => string) =>
  fc.date({ min: new Date(0), max: new Date(Date.UTC(9999, 11, 31)) }).map((d) => form(d.toISOString()))
/** The shapes of date-time text the parsers see most: canonical-looking, and `toISOString` with and without millis. */
const usualForms = [canonicalish, printed((iso) => iso), printed((iso) => iso.replace(".000Z", "Z"))] as const

describe("instantMillis", () => {
  test("agrees with its definition on canonical-looking, ISO and arbitrary strings", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          ...usualForms,
          fc.string(),
          fc.constantFrom(
            "2024-02-29T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2000-02-29T12:00:00.5Z",
            "0075-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999Z",
            "2026-01-01T00:00:00+02:00",
            "2026-01-01t00:00:00z",
            "2026-01-01T24:00:00Z",
            "+02026-01-01T00:00:00Z",
            "2026-01-01T00:00:00.1234Z",
            "٢٠٢٦-01-01T00:00:00Z"
          )
        ),
        (text) => expect(instantMillis(text)).toBe(reference(text))
      ),
      { numRuns: 20_000 }
    )
  })
})

describe("instantOf and formatInstant", () => {
  test("name the instant instantMillis reads, and print it exactly as toISOString does, whatever form it was sent in", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          ...usualForms,
          printed((iso) => iso.replace("Z", "+00:00")),
          fc.constantFrom("2026-01-01T00:00:00.5Z", "2026-01-01t00:00:00.000z", "2026-01-01T01:00:00.000+01:00")
        ),
        (text) => {
          const instant = instantOf(text)
          const ms = instantMillis(text)
          expect(instant === undefined ? undefined : DateTime.toEpochMillis(instant)).toBe(ms)
          if (instant !== undefined) expect(formatInstant(instant)).toBe(new Date(ms!).toISOString())
        }
      ),
      { numRuns: 20_000 }
    )
  })
})

describe("isoOfMillis", () => {
  test("is toISOString for any millisecond, in any order, neighbours in the same minute or not", () => {
    const millis = fc.oneof(
      fc.integer({ min: 0, max: LAST_MS }),
      fc
        .integer({ min: 0, max: LAST_MS })
        .chain((ms) => fc.integer({ min: Math.max(0, ms - 120_000), max: Math.min(LAST_MS, ms + 120_000) })),
      fc.constantFrom(0, 59_999, 60_000, LAST_MS, LAST_MS - 1)
    )
    fc.assert(
      fc.property(fc.array(millis, { minLength: 1, maxLength: 20 }), (list) => {
        for (const ms of list) expect(isoOfMillis(ms)).toBe(new Date(ms).toISOString())
      }),
      { numRuns: 5000 }
    )
    for (const odd of [-1, 0.5, LAST_MS + 1]) expect(isoOfMillis(odd)).toBe(new Date(odd).toISOString())
  })
})
