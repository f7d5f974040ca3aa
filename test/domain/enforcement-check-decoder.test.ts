import { describe, expect, test } from "bun:test"
import { Either, FastCheck as fc, Schema } from "effect"
import { decodeCheckRequest, EnforcementCheckRequest } from "#src/domain/Enforcement"
import { A_UUID as UUID, checkBody } from "../support/CheckBodies.ts"

const bySchema = Schema.decodeUnknownEither(EnforcementCheckRequest)

describe("decodeCheckRequest", () => {
  test("accepts exactly what EnforcementCheckRequest accepts, with the same output in the same key order", () => {
    fc.assert(
      fc.property(checkBody, (input) => {
        const fast = decodeCheckRequest(input)
        const schema = bySchema(input)
        expect(fast !== undefined).toBe(Either.isRight(schema))
        if (fast !== undefined && Either.isRight(schema)) {
          expect(fast).toStrictEqual(schema.right)
          expect(Object.keys(fast)).toEqual(Object.keys(schema.right))
        }
      }),
      { numRuns: 5000 }
    )
  })

  test("the edges: lengths, UUIDs, bounds and strictness", () => {
    const base = { run_id: "r" }
    const cases: ReadonlyArray<unknown> = [
      base,
      { run_id: "" },
      { run_id: "x".repeat(201) },
      { ...base, project_id: UUID.toUpperCase() },
      { ...base, trace_id: "nope" },
      { ...base, proposed_usd: 1e12 },
      { ...base, proposed_usd: 1e12 + 1 },
      { ...base, proposed_tokens: 1.5 },
      { ...base, step_index: -1 },
      { ...base, model: "a\u0000" },
      { ...base, tool_name: undefined },
      { ...base, extra: 1 },
      JSON.parse('{"run_id": "r", "__proto__": 1}'),
      [],
      null,
      "r"
    ]
    for (const input of cases) {
      const schema = bySchema(input)
      expect([input, decodeCheckRequest(input) !== undefined]).toEqual([input, Either.isRight(schema)])
    }
  })
})
