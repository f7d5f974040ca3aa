import { expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { readStoredGroup, type SpanEventCode, type StreamGroup, storedGroup } from "#src/domain/StreamEvent"

// The live stream's log stores a group's span events as one string (docs/stream.md): what is read back is the
// group as written, and rows written with the events as pairs read as they are.
const group = fc.record(
  {
    t: fc.uuid(),
    b: fc.constant("created" as const),
    s: fc.array(fc.tuple(fc.uuid(), fc.constantFrom<SpanEventCode>("c", "u", "t")), { maxLength: 40 }),
    a: fc.constantFrom("updated" as const, "terminal" as const, "deleted" as const)
  },
  { requiredKeys: ["t", "s"] }
)

test("property: a stored group reads back as the group written, through JSON", () => {
  fc.assert(
    fc.property(group, (g: StreamGroup) => {
      const stored = JSON.parse(JSON.stringify(storedGroup(g)))
      expect(typeof stored.s).toBe("string")
      expect(stored.s).toHaveLength(23 * g.s.length)
      expect(readStoredGroup(stored)).toEqual(g)
    })
  )
})

test("property: a group stored with its events as pairs reads unchanged", () => {
  fc.assert(fc.property(group, (g: StreamGroup) => expect(readStoredGroup(JSON.parse(JSON.stringify(g)))).toEqual(g)))
})

test("an id in capitals reads back in the form PostgreSQL prints", () => {
  const id = "0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D"
  const g: StreamGroup = { t: id, s: [[id, "c"]] }
  expect(readStoredGroup(storedGroup(g)).s).toEqual([[id.toLowerCase(), "c"]])
})
