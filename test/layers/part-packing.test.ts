import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { PACKED_MARK, packPart, packSkeleton, partText, skeletonText, unpackPart } from "#layers/traces/PartPacking"
import { splitPayload } from "#layers/traces/PayloadSplit"
import { PartTexts } from "#layers/traces/SharedParts"

describe("shared parts stored compressed (PartPacking)", () => {
  test("a packed part reads back byte for byte; one that does not pay is left plain", () => {
    const repeated = fc
      .tuple(fc.string({ unit: "grapheme", minLength: 1, maxLength: 30 }), fc.integer({ min: 2, max: 100 }))
      .map(([s, n]) => JSON.stringify(Array.from({ length: n }, (_, i) => `${s}${i % 3}`)))
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "grapheme", maxLength: 3000 }), repeated, fc.json()), (text) => {
        const packed = packPart(text)
        if (packed === undefined) return
        expect(packed.length).toBeLessThanOrEqual(0.75 * Buffer.byteLength(text))
        expect(unpackPart(packed)).toBe(text)
        expect(partText(null, new Uint8Array(packed))).toBe(text)
      }),
      { numRuns: 500 }
    )
  })

  test("text compresses; random data and short texts stay plain; an unknown format is refused", () => {
    const prose = `{"role":"user","content":"${"the quick brown fox é✓😀 ".repeat(40)}"}`
    expect(packPart(prose)).toBeDefined()
    expect(unpackPart(packPart(prose)!)).toBe(prose)
    expect(packPart("short")).toBeUndefined()
    const noise = Buffer.from(crypto.getRandomValues(new Uint8Array(1500))).toString("base64")
    expect(packPart(JSON.stringify(noise))).toBeUndefined()
    expect(partText("plain", null)).toBe("plain")
    expect(() => unpackPart(new Uint8Array([9, 1, 2]))).toThrow("unknown format")
  })
})

describe("skeletons stored packed when smaller (packSkeleton)", () => {
  test("any payload's skeleton reads back byte for byte, never larger than its text", () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: "grapheme" }), fc.string({ unit: "grapheme", maxLength: 300 }), (v, s) => {
        for (const skel of [splitPayload(v)?.skel, JSON.stringify(v) ?? "null", s, `\x01${s}\x01`]) {
          if (skel === undefined) continue
          const stored = packSkeleton(skel)
          expect(skeletonText(stored)).toBe(skel)
          expect(Buffer.byteLength(stored)).toBeLessThanOrEqual(Buffer.byteLength(skel))
          expect(stored === skel || stored.startsWith(PACKED_MARK)).toBe(true)
        }
      }),
      { numRuns: 500 }
    )
  })

  test("a model call's skeleton (the remainders of its history's messages) is packed to a fraction of its size", () => {
    const messages = Array.from({ length: 30 }, (_, i) => [
      { role: "assistant", content: null, tool_calls: [{ id: `call_${i}`, type: "function" }] },
      { role: "tool", tool_call_id: `call_${i}`, content: `result ${i} ${"r".repeat(1500)}` }
    ]).flat()
    const skel = splitPayload({ model: "gpt-4o", messages })!.skel
    const stored = packSkeleton(skel)
    expect(stored.startsWith(PACKED_MARK)).toBe(true)
    expect(Buffer.byteLength(stored)).toBeLessThan(Buffer.byteLength(skel) / 3)
    expect(skeletonText(stored)).toBe(skel)
    expect(packSkeleton("\x01")).toBe("\x01")
  })
})

describe("part texts kept in memory (PartTexts)", () => {
  test("least recently used go first, within the capacity in characters; a text over a sixteenth of it is not kept", () => {
    const texts = new PartTexts(160)
    for (let i = 0; i < 16; i++) texts.set(String(i), "x".repeat(10))
    expect(texts.get("0")).toBe("x".repeat(10))
    texts.set("16", "y".repeat(10))
    expect(texts.get("1")).toBeUndefined()
    expect(texts.get("0")).toBe("x".repeat(10))
    expect(texts.get("16")).toBe("y".repeat(10))
    texts.set("big", "z".repeat(11))
    expect(texts.get("big")).toBeUndefined()
    fc.assert(
      // An id always has the same text (as a part's id does).
      fc.property(fc.array(fc.nat(30)), (ids) => {
        const textOf = (id: number) => `${id}:`.padEnd(2 + (id % 7), "t")
        const kept = new PartTexts(200)
        for (const id of ids) kept.set(String(id), textOf(id))
        let chars = 0
        for (const id of new Set(ids)) {
          const text = kept.get(String(id))
          if (text !== undefined) {
            expect(text).toBe(textOf(id))
            chars += text.length
          }
        }
        expect(ids.length === 0 || kept.get(String(ids[ids.length - 1])) !== undefined).toBe(true)
        expect(chars).toBeLessThanOrEqual(200)
      })
    )
  })
})
