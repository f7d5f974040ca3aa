import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"

import { layOut, type SpanTiming } from "#src/domain/CausalOrder"

/** A random forest: each span's parent is an earlier span or none; some parents point outside the trace. */
const forest = fc
  .array(
    fc.record({
      parent: fc.option(fc.nat(), { nil: null }),
      start: fc.integer({ min: 0, max: 50 }),
      length: fc.integer({ min: 0, max: 20 }),
      dangling: fc.boolean()
    }),
    { maxLength: 60 }
  )
  .map((rows) =>
    rows.map(
      (row, i): SpanTiming => ({
        id: `s${String(i).padStart(3, "0")}`,
        parentId: row.dangling
          ? "missing"
          : row.parent === null || i === 0
            ? null
            : `s${String(row.parent % i).padStart(3, "0")}`,
        startMs: row.start,
        endMs: row.start + row.length
      })
    )
  )

describe("layOut", () => {
  test("causalOrder is a permutation of the ids with every parent before its children", () => {
    fc.assert(
      fc.property(forest, (spans) => {
        const { causalOrder } = layOut(spans)
        expect([...causalOrder].sort()).toEqual(spans.map((s) => s.id).sort())
        const position = new Map(causalOrder.map((id, i) => [id, i]))
        for (const span of spans) {
          if (span.parentId !== null && position.has(span.parentId)) {
            expect(position.get(span.parentId)!).toBeLessThan(position.get(span.id)!)
          }
        }
      })
    )
  })

  test("siblings appear in start order, and every concurrent group is siblings chained by overlap", () => {
    fc.assert(
      fc.property(forest, (spans) => {
        const { causalOrder, concurrentGroups } = layOut(spans)
        const byId = new Map(spans.map((s) => [s.id, s]))
        const ids = new Set(byId.keys())
        const parentOf = (s: SpanTiming) => (s.parentId !== null && ids.has(s.parentId) ? s.parentId : null)
        const position = new Map(causalOrder.map((id, i) => [id, i]))
        for (const a of spans) {
          for (const b of spans) {
            if (a !== b && parentOf(a) === parentOf(b) && a.startMs < b.startMs) {
              expect(position.get(a.id)!).toBeLessThan(position.get(b.id)!)
            }
          }
        }
        const grouped = new Set<string>()
        for (const group of concurrentGroups) {
          expect(group.length).toBeGreaterThanOrEqual(2)
          const members = group.map((id) => byId.get(id)!)
          expect(new Set(members.map(parentOf)).size).toBe(1)
          let end = members[0]!.endMs
          for (const m of members.slice(1)) {
            expect(m.startMs < end || m.startMs === members[0]!.startMs).toBe(true)
            end = Math.max(end, m.endMs)
          }
          for (const id of group) {
            expect(grouped.has(id)).toBe(false)
            grouped.add(id)
          }
        }
      })
    )
  })

  test("overlapping siblings form one group; disjoint ones none; a parent cycle still yields every span once", () => {
    const spans: Array<SpanTiming> = [
      { id: "r", parentId: null, startMs: 0, endMs: 100 },
      { id: "a", parentId: "r", startMs: 10, endMs: 30 },
      { id: "b", parentId: "r", startMs: 20, endMs: 40 },
      { id: "c", parentId: "r", startMs: 35, endMs: 50 },
      { id: "d", parentId: "r", startMs: 60, endMs: 70 }
    ]
    expect(layOut(spans)).toEqual({ causalOrder: ["r", "a", "b", "c", "d"], concurrentGroups: [["a", "b", "c"]] })
    const cycle = layOut([
      { id: "x", parentId: "y", startMs: 1, endMs: 1 },
      { id: "y", parentId: "x", startMs: 0, endMs: 0 }
    ])
    expect(cycle.causalOrder).toEqual(["y", "x"])
  })
})
