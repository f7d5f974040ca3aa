import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { IngestDemand } from "#layers/ingest/IngestDemand"

describe("IngestDemand", () => {
  test("exceeded once at least ten refusals outnumber the admissions of the last second, and not a second later", () => {
    const demand = new IngestDemand()
    for (let i = 0; i < 9; i++) demand.refused(1000 + i)
    expect(demand.exceeded(1010)).toBe(false)
    demand.refused(1010)
    expect(demand.exceeded(1010)).toBe(true)
    for (let i = 0; i < 10; i++) demand.admitted(1020)
    // As many admitted as refused: taken as they come.
    expect(demand.exceeded(1020)).toBe(false)
    demand.refused(1500)
    expect(demand.exceeded(1500)).toBe(true)
    // The window is a second, in tenths: the first refusals have left it by 2100.
    expect(demand.exceeded(2100)).toBe(false)
    expect(demand.exceeded(5000)).toBe(false)
  })

  test("agrees with counting the events of the last ten tenths of a second, whatever their order and gaps", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 400 }), refused: fc.boolean() }), { maxLength: 300 }),
        (events) => {
          const demand = new IngestDemand()
          const seen: Array<{ at: number; refused: boolean }> = []
          let now = 0
          for (const event of events) {
            now += event.gap
            if (event.refused) demand.refused(now)
            else demand.admitted(now)
            seen.push({ at: now, refused: event.refused })
            const bucket = Math.floor(now / 100)
            const recent = seen.filter((e) => Math.floor(e.at / 100) > bucket - 10)
            const refused = recent.filter((e) => e.refused).length
            expect(demand.exceeded(now)).toBe(refused >= 10 && refused > recent.length - refused)
          }
        }
      )
    )
  })
})
