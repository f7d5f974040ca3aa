import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import {
  type Baseline,
  detect,
  type DetectionSettings,
  MAX_FINDINGS_PER_KIND,
  median,
  type SpanFacts
} from "#src/domain/Insight"
import { argsHash, canonicalJson } from "#layers/evaluations/Detection"

const settings: DetectionSettings = {
  loopRepeats: 3,
  baselineFactor: 3,
  baselineMinSample: 10,
  tokenFactor: 10,
  tokenCap: 200_000
}
const noBaseline: Baseline = { sample: 0, medianCost: null, medianLatencyMs: null }
const trace = { status: "completed" as const, totalCost: 1, latencyMs: 1000 }
let n = 0
const s = (over: Partial<SpanFacts> = {}): SpanFacts => ({
  id: `span-${n++}`,
  spanType: "llm_call",
  name: "step",
  failed: false,
  error: null,
  tokens: 0,
  argsHash: null,
  ...over
})
const kinds = (findings: ReadonlyArray<{ kind: string }>) => findings.map((f) => f.kind)

describe("detect", () => {
  test("nothing unusual, nothing found", () => {
    expect(
      detect(trace, [s(), s({ tokens: 100 }), s({ spanType: "tool_call", argsHash: "a" })], noBaseline, settings)
    ).toEqual([])
  })

  test("the loop threshold is configurable and counts tool_call spans of one name and one argument hash", () => {
    const loop = [1, 2, 3].map(() => s({ spanType: "tool_call", name: "search", argsHash: "h" }))
    expect(kinds(detect(trace, loop, noBaseline, settings))).toEqual(["tool_loop"])
    expect(kinds(detect(trace, loop.slice(0, 2), noBaseline, settings))).toEqual([])
    expect(kinds(detect(trace, loop.slice(0, 2), noBaseline, { ...settings, loopRepeats: 2 }))).toEqual(["tool_loop"])
    const mixed = [
      s({ spanType: "tool_call", name: "a", argsHash: "h" }),
      s({ spanType: "tool_call", name: "b", argsHash: "h" }),
      s({ spanType: "tool_call", name: "a", argsHash: "g" })
    ]
    expect(detect(trace, mixed, noBaseline, { ...settings, loopRepeats: 2 })).toEqual([])
    const six = [1, 2, 3, 4, 5, 6].map(() => s({ spanType: "tool_call", name: "search", argsHash: "h" }))
    expect(detect(trace, six, noBaseline, settings)[0]).toMatchObject({
      severity: "high",
      key: "search:h",
      details: { count: 6 }
    })
  })

  test("baseline anomalies need the minimum sample and a positive median", () => {
    const costly = { ...trace, totalCost: 4, latencyMs: 3001 }
    const baseline = { sample: 10, medianCost: 1, medianLatencyMs: 1000 }
    expect(kinds(detect(costly, [], baseline, settings))).toEqual(["cost_anomaly", "latency_anomaly"])
    expect(kinds(detect(costly, [], { ...baseline, sample: 9 }, settings))).toEqual([])
    expect(kinds(detect(costly, [], { ...baseline, medianCost: 0, medianLatencyMs: null }, settings))).toEqual([])
    expect(kinds(detect({ ...trace, totalCost: 3, latencyMs: 3000 }, [], baseline, settings))).toEqual([])
  })

  test("token blow-ups: relative needs at least 3 spans with tokens; the cap applies alone", () => {
    expect(kinds(detect(trace, [s({ tokens: 10 }), s({ tokens: 1000 })], noBaseline, settings))).toEqual([])
    expect(
      kinds(detect(trace, [s({ tokens: 10 }), s({ tokens: 10 }), s({ tokens: 1000 })], noBaseline, settings))
    ).toEqual(["token_blowup"])
    expect(kinds(detect(trace, [s({ tokens: 200_001 })], noBaseline, settings))).toEqual(["token_blowup"])
  })

  test("property: findings are bounded per kind and unique per (kind, key)", () => {
    const spanArb = fc.record({
      spanType: fc.constantFrom("llm_call", "tool_call", "error"),
      name: fc.constantFrom("a", "b", "c"),
      failed: fc.boolean(),
      tokens: fc.nat(400_000),
      argsHash: fc.constantFrom("x", "y", null)
    })
    fc.assert(
      fc.property(fc.array(spanArb, { maxLength: 200 }), fc.nat(30), (spans, sample) => {
        const findings = detect(
          trace,
          spans.map((x) => s({ ...x, error: null })),
          { sample, medianCost: 0.1, medianLatencyMs: 100 },
          settings
        )
        const keys = findings.map((f) => `${f.kind}|${f.key}`)
        expect(new Set(keys).size).toBe(keys.length)
        for (const kind of ["failed_span", "tool_loop", "token_blowup"]) {
          expect(findings.filter((f) => f.kind === kind).length).toBeLessThanOrEqual(MAX_FINDINGS_PER_KIND)
        }
        expect(findings.filter((f) => f.kind === "failed_span").length).toBe(
          Math.min(MAX_FINDINGS_PER_KIND, spans.filter((x) => x.failed).length)
        )
      }),
      { numRuns: 200 }
    )
  })

  test("median", () => {
    expect(median([])).toBeNull()
    expect(median([3, 1, 2])).toBe(2)
    expect(median([4, 1, 3, 2])).toBe(2.5)
  })

  test("arguments' hash: equal for values jsonb holds equal (key order, duplicate keys, spacing, number spelling)", () => {
    expect(argsHash('{"a":1,"b":[1.0,{"y":"z","x":null}]}')).toBe(
      argsHash('{ "b": [1, {"x": null, "y": "z"}], "a": 1e0 }')
    )
    expect(argsHash('{"a":2,"a":1}')).toBe(argsHash('{"a":1}'))
    expect(argsHash(null)).toBe(argsHash("null"))
    expect(argsHash('{"a":1}')).not.toBe(argsHash('{"a":"1"}'))
    expect(argsHash("[1,2]")).not.toBe(argsHash("[2,1]"))
    expect(argsHash("{}")).toMatch(/^[0-9a-f]{16}$/)
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(JSON.parse(canonicalJson(v))).toEqual(JSON.parse(JSON.stringify(v)))
        const shuffled = JSON.parse(JSON.stringify(v), (_k, x) =>
          typeof x === "object" && x !== null && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).reverse()) : x
        )
        expect(argsHash(JSON.stringify(shuffled))).toBe(argsHash(JSON.stringify(v)))
      }),
      { numRuns: 200 }
    )
  })
})
