import { describe, expect, test } from "bun:test"
import { DateTime, Either, FastCheck as fc } from "effect"
import type { Trace } from "../../../src/domain/Trace.ts"
import {
  FILTER_KEYS,
  filtersFromSearch,
  filtersToSearch,
  listParams,
  matchesFilters,
  type TraceFilters
} from "../../../src/ui/app/pages/traces/traceFilters.ts"

const text = fc
  .string({ minLength: 1, maxLength: 30 })
  .filter((s) => s.trim() !== "")
  .map((s) => s.trim())
const instant = fc
  .integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2030, 0, 1) })
  .map((ms) => new Date(ms).toISOString())

/** Valid values for each filter. */
const validFilters: fc.Arbitrary<TraceFilters> = fc
  .record(
    {
      status: fc.constantFrom("running", "completed", "failed"),
      environment: fc.constantFrom("production", "sandbox"),
      project_id: fc.uuid(),
      session_id: text,
      name: text,
      model: text,
      has_error: fc.constantFrom("true", "false"),
      date_from: instant,
      date_to: instant,
      min_cost: fc.integer({ min: 0, max: 10_000 }).map((n) => String(n / 100)),
      min_duration_ms: fc.nat({ max: 1_000_000 }).map(String)
    },
    { requiredKeys: [] }
  )
  .filter((f) => f.date_from === undefined || f.date_to === undefined || f.date_from <= f.date_to)

describe("filters ↔ URL", () => {
  test("a filter set survives the URL unchanged, in one canonical form", () => {
    fc.assert(
      fc.property(
        validFilters,
        fc.array(fc.tuple(fc.constantFrom("span", "q", "x"), text), { maxLength: 3 }),
        (filters, noise) => {
          const search = filtersToSearch(filters)
          const parsed = new URLSearchParams(search)
          for (const [key, value] of noise) parsed.append(key, value)
          expect(filtersFromSearch(parsed)).toEqual(filters)
          expect(filtersToSearch(filtersFromSearch(parsed))).toBe(search)
        }
      ),
      { numRuns: 300 }
    )
  })

  test("every valid filter set is accepted by the contract's schema", () => {
    fc.assert(
      fc.property(validFilters, (filters) => {
        const params = listParams(filters, { limit: 50 })
        expect(Either.isRight(params)).toBe(true)
        const value = Either.getOrThrow(params)
        expect(value.limit).toBe(50)
        expect(value.status).toBe(filters.status as never)
      }),
      { numRuns: 200 }
    )
  })

  test("blank values and unknown keys are dropped", () => {
    expect(filtersFromSearch(new URLSearchParams("status=&name=%20%20&foo=1&model=gpt-4o"))).toEqual({
      model: "gpt-4o"
    })
    expect(FILTER_KEYS.length).toBe(11)
  })

  test("a bad value is named before any request", () => {
    const bad = listParams({ status: "exploded", min_cost: "-1" }, { limit: 50 })
    expect(Either.isLeft(bad)).toBe(true)
    const message = Either.getLeft(bad).pipe((m) => (m._tag === "Some" ? m.value : ""))
    expect(message).toContain("status")
    expect(message).toContain("min_cost")
    const reversed = listParams({ date_from: "2026-02-01T00:00:00Z", date_to: "2026-01-01T00:00:00Z" }, { limit: 50 })
    expect(Either.getLeft(reversed).pipe((m) => (m._tag === "Some" ? m.value : ""))).toContain("date_to")
  })
})

describe("matchesFilters (live arrivals)", () => {
  const trace = (overrides: Partial<Trace> = {}): Trace => ({
    id: crypto.randomUUID() as Trace["id"],
    status: "running",
    name: "Book a Flight",
    startedAt: DateTime.unsafeMake("2026-06-01T12:00:00Z"),
    environment: "production",
    totalCost: "0.5",
    totalDurationMs: 1200,
    sessionId: "chat-1",
    ...overrides
  })
  const params = (filters: TraceFilters) => Either.getOrThrow(listParams(filters, { limit: 50 }))

  test("decides from the trace's own fields", () => {
    expect(matchesFilters(trace(), params({}))).toBe(true)
    expect(matchesFilters(trace(), params({ name: "flight" }))).toBe(true)
    expect(matchesFilters(trace(), params({ name: "hotel" }))).toBe(false)
    expect(matchesFilters(trace(), params({ status: "failed" }))).toBe(false)
    expect(matchesFilters(trace({ environment: "sandbox" }), params({}))).toBe(false)
    expect(matchesFilters(trace({ environment: "sandbox" }), params({ environment: "sandbox" }))).toBe(true)
    expect(matchesFilters(trace(), params({ session_id: "chat-2" }))).toBe(false)
    expect(matchesFilters(trace(), params({ min_cost: "1" }))).toBe(false)
    expect(matchesFilters(trace(), params({ min_duration_ms: "1000" }))).toBe(true)
    expect(matchesFilters(trace(), params({ date_from: "2026-06-02T00:00:00Z" }))).toBe(false)
  })

  test("cannot tell for span-level filters", () => {
    expect(matchesFilters(trace(), params({ model: "gpt-4o" }))).toBeUndefined()
    expect(matchesFilters(trace(), params({ has_error: "true" }))).toBeUndefined()
    expect(matchesFilters(trace(), params({ has_error: "true", status: "failed" }))).toBe(false)
  })
})
