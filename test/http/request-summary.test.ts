import { describe, expect, test } from "bun:test"
import { Effect, FastCheck as fc } from "effect"
import { RequestSummary } from "#src/http/RequestSummary"

const makeSummary = () => Effect.runSync(RequestSummary.pipe(Effect.provide(RequestSummary.Default)))

describe("RequestSummary", () => {
  test("a period's tally counts every request once, in its status class, and the next period starts empty", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ status: fc.integer({ min: 100, max: 599 }), ms: fc.double({ min: 0, max: 1e6, noNaN: true }) }),
          { maxLength: 200 }
        ),
        (requests) => {
          const summary = makeSummary()
          for (const r of requests) summary.record(r.status, r.ms)
          const tally = summary.take()
          const inClass = (lo: number, hi: number) => requests.filter((r) => r.status >= lo && r.status < hi).length
          expect(tally.requests).toBe(requests.length)
          expect(tally.s2xx).toBe(inClass(0, 300))
          expect(tally.s3xx).toBe(inClass(300, 400))
          expect(tally.s4xx).toBe(inClass(400, 500))
          expect(tally.s5xx).toBe(inClass(500, 600))
          expect(tally.slowestMs).toBe(requests.reduce((m, r) => Math.max(m, r.ms), 0))
          expect(summary.take()).toEqual({ requests: 0, s2xx: 0, s3xx: 0, s4xx: 0, s5xx: 0, slowestMs: 0 })
        }
      )
    )
  })

  test("two applications keep their own tallies", () => {
    const a = makeSummary()
    const b = makeSummary()
    a.record(200, 1)
    expect(b.take().requests).toBe(0)
    expect(a.take().requests).toBe(1)
  })
})
