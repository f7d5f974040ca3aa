import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { int8Bytes, int8Distance, int8Hex, int8SignBits, reals } from "#layers/search/VectorText"
import { int8Direction } from "../../support/Int8Vectors.ts"
import { INT8_COSINE_TOLERANCE } from "../../support/SearchTolerance.ts"

// Vectors at one byte a component (PostgreSQL without pgvector, migration 0044): the cosine with the stored
// direction stays within INT8_COSINE_TOLERANCE of the full-precision cosine, for unit vectors dense or sparse.

const unit = (xs: ReadonlyArray<number>) => {
  const norm = Math.hypot(...xs)
  return norm === 0 ? xs.map(() => 0) : xs.map((x) => x / norm)
}
const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!
  return s
}
const component = fc.oneof(
  fc.double({ min: -1, max: 1, noNaN: true }),
  // Sparse: the offline embedder's hashed features are mostly zero.
  fc.constant(0),
  fc.constant(0),
  fc.double({ min: -0.01, max: 0.01, noNaN: true })
)
const vector = fc.array(component, { minLength: 256, maxLength: 256 }).map(unit)

describe("one byte a component", () => {
  test("the cosine with the stored direction is within the tolerance of the full-precision cosine", () => {
    fc.assert(
      fc.property(vector, vector, (v, q) => {
        const stored = int8Direction(int8Bytes(v))
        expect(Math.abs(dot(q, stored) - dot(q, v))).toBeLessThan(INT8_COSINE_TOLERANCE)
      }),
      { numRuns: 500 }
    )
  })

  test("the re-rank's distance is 1 − the cosine with the stored direction (1 for a zero vector)", () => {
    fc.assert(
      fc.property(vector, vector, (v, q) => {
        const bytes = int8Bytes(v)
        const expected = v.every((x) => x === 0) ? 1 : 1 - dot(q, int8Direction(bytes))
        expect(Math.abs(int8Distance(bytes, q) - expected)).toBeLessThan(1e-12)
      }),
      { numRuns: 300 }
    )
    expect([...reals("{0.5,-0.1,0}")]).toEqual([0.5, Math.fround(-0.1), 0])
  })

  test("bytes are 128 plus −127…127, the largest magnitude at ±127, a zero vector all 128", () => {
    fc.assert(
      fc.property(vector, (v) => {
        const bytes = int8Bytes(v)
        expect(bytes.length).toBe(v.length)
        if (v.every((x) => x === 0)) {
          expect([...bytes].every((b) => b === 128)).toBe(true)
          return
        }
        expect(Math.max(...[...bytes].map((b) => Math.abs(b - 128)))).toBe(127)
        for (let i = 0; i < v.length; i++)
          expect(Math.sign(bytes[i]! - 128) * Math.sign(v[i]!)).toBeGreaterThanOrEqual(0)
      })
    )
    expect(int8Hex(int8Bytes([0.5, -1, 0, 0.25]))).toBe("c00180a0")
    expect(int8SignBits(Uint8Array.from([129, 128, 127, 255]))).toBe("1001")
  })
})
