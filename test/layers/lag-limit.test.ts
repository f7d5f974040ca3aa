import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { LagLimit } from "#layers/ingest/LagLimit"

describe("LagLimit", () => {
  test("halved down to one at each late step, one more at each step on time, moved once a step", () => {
    const limit = new LagLimit(8, 100)
    const late = () => true
    const onTime = () => false
    expect(limit.at(0, late)).toBe(4)
    // Within the step: not moved, not even asked.
    expect(
      limit.at(50, () => {
        throw new Error("asked within a step")
      })
    ).toBe(4)
    expect(limit.at(100, late)).toBe(2)
    expect(limit.at(200, late)).toBe(1)
    expect(limit.at(300, late)).toBe(1)
    expect(limit.at(400, onTime)).toBe(2)
    expect(limit.at(500, onTime)).toBe(3)
    // Three steps on time since the last move: three more, never past the bound.
    expect(limit.at(800, onTime)).toBe(6)
    expect(limit.at(5000, onTime)).toBe(8)
  })

  test("any sequence of steps keeps the limit between one and the bound, and never stops admission", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 64 }),
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 1000 }), late: fc.boolean() }), { maxLength: 200 }),
        (max, steps) => {
          const limit = new LagLimit(max, 100)
          let now = 0
          let previous = max
          for (const step of steps) {
            now += step.gap
            const next = limit.at(now, () => step.late)
            expect(next).toBeGreaterThanOrEqual(1)
            expect(next).toBeLessThanOrEqual(max)
            if (step.late) expect(next).toBeLessThanOrEqual(previous)
            else expect(next).toBeGreaterThanOrEqual(previous)
            previous = next
          }
        }
      )
    )
  })
})
