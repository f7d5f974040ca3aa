import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { createHash } from "node:crypto"
import { sha256Hex } from "#src/domain/hashing/Sha256"

const nodeSha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex")

describe("sha256Hex", () => {
  test("FIPS 180-4 examples, and the padding edges (55, 56, 63, 64 and 119 bytes)", () => {
    expect(sha256Hex("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    expect(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")).toBe(
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    )
    for (const n of [55, 56, 63, 64, 119, 120, 1000]) expect(sha256Hex("x".repeat(n))).toBe(nodeSha256("x".repeat(n)))
  })

  test("property: equals node:crypto on any string (UTF-8, lone surrogates as U+FFFD like node)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary", maxLength: 300 }), fc.string({ unit: "grapheme" })), (s) => {
        expect(sha256Hex(s)).toBe(nodeSha256(s))
      }),
      { numRuns: 2000 }
    )
  })
})
