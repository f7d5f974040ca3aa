import { describe, expect, test } from "bun:test"
import { Either, FastCheck as fc, Schema } from "effect"
import { PageNumber } from "#src/domain/Page"

const decode = Schema.decodeUnknownEither(PageNumber(0, Number.MAX_SAFE_INTEGER))

describe("PageNumber (an integer query parameter)", () => {
  test("refuses every spelling but plain decimal digits", () => {
    for (const bad of [
      "0x10",
      "+5",
      " 5",
      "5 ",
      "%205",
      "1e2",
      "1.0",
      "-0",
      "",
      "0b1",
      "0o7",
      "Infinity",
      "NaN",
      "٣",
      "5\n"
    ]) {
      expect(Either.isLeft(decode(bad))).toBe(true)
    }
    expect(decode("007")).toEqual(Either.right(7))
    expect(decode("0")).toEqual(Either.right(0))
  })

  test("decodes a string exactly when it is plain decimal digits (property)", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.stringMatching(/^[0-9]{1,16}$/),
          fc.integer().map((n) => String(n))
        ),
        (s) => {
          const decoded = decode(s)
          const plain = /^[0-9]{1,16}$/.test(s) && Number(s) <= Number.MAX_SAFE_INTEGER
          expect(Either.isRight(decoded)).toBe(plain)
          if (Either.isRight(decoded)) expect(decoded.right).toBe(Number(s))
        }
      ),
      { numRuns: 2000 }
    )
  })
})
