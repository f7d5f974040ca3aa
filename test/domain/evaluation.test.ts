import { describe, expect, test } from "bun:test"
import { Either, FastCheck as fc, Schema } from "effect"
import { judgeMessages, renderSpans } from "#src/domain/evaluation/JudgePrompt"
import { CreateEvaluationRequest, EvaluationGateRequest, RunEvaluationRequest } from "#src/domain/Evaluation"
import { gateVerdict, REGRESSION_TOLERANCE, weightedScore } from "#src/domain/EvaluationScoring"

const score01 = fc.double({ min: 0, max: 1, noNaN: true })
const weight = fc.oneof(fc.constant(0), fc.constant(10), fc.double({ min: 0, max: 10, noNaN: true }))
const criteria = fc.array(fc.record({ weight, score: score01 }), { minLength: 1, maxLength: 10 })

describe("weightedScore", () => {
  test("examples: the weight-normalised mean; weight 0 counts for nothing; all 0 → the plain mean", () => {
    expect(
      weightedScore([
        { weight: 1, score: 1 },
        { weight: 3, score: 0 }
      ])
    ).toBe(0.25)
    expect(
      weightedScore([
        { weight: 2, score: 0.5 },
        { weight: 2, score: 1 }
      ])
    ).toBe(0.75)
    expect(
      weightedScore([
        { weight: 0, score: 0 },
        { weight: 5, score: 0.8 }
      ])
    ).toBe(0.8)
    expect(
      weightedScore([
        { weight: 0, score: 0.2 },
        { weight: 0, score: 0.6 }
      ])
    ).toBeCloseTo(0.4, 12)
    expect(weightedScore([])).toBe(0)
  })

  test("property: equals Σ wᵢsᵢ / Σ wᵢ (or the mean when all weights are 0), and stays in [0, 1]", () => {
    fc.assert(
      fc.property(criteria, (cs) => {
        const total = cs.reduce((n, c) => n + c.weight, 0)
        const expected =
          total > 0
            ? cs.reduce((n, c) => n + c.weight * c.score, 0) / total
            : cs.reduce((n, c) => n + c.score, 0) / cs.length
        const s = weightedScore(cs)
        expect(s).toBeGreaterThanOrEqual(0)
        expect(s).toBeLessThanOrEqual(1)
        expect(Math.abs(s - Math.min(1, Math.max(0, expected)))).toBeLessThan(1e-12)
      }),
      { numRuns: 500 }
    )
  })

  test("property: monotone in each criterion's score", () => {
    fc.assert(
      fc.property(criteria, fc.nat(), score01, (cs, pick, other) => {
        const i = pick % cs.length
        const lower = Math.min(cs[i]!.score, other)
        const higher = Math.max(cs[i]!.score, other)
        const at = (s: number) => weightedScore(cs.map((c, j) => (j === i ? { ...c, score: s } : c)))
        expect(at(higher)).toBeGreaterThanOrEqual(at(lower))
      }),
      { numRuns: 500 }
    )
  })

  test("property: a weight-0 criterion is irrelevant when another has weight > 0", () => {
    fc.assert(
      fc.property(criteria, score01, score01, (cs, a, b) => {
        fc.pre(cs.some((c) => c.weight > 0))
        const withA = weightedScore([...cs, { weight: 0, score: a }])
        const withB = weightedScore([...cs, { weight: 0, score: b }])
        expect(withA).toBe(withB)
        expect(withA).toBe(weightedScore(cs))
      }),
      { numRuns: 500 }
    )
  })

  test("property: scaling every weight by the same factor changes nothing", () => {
    fc.assert(
      fc.property(criteria, fc.double({ min: 0.1, max: 1, noNaN: true }), (cs, k) => {
        // Only for weights that stay normal numbers when scaled: a subnormal weight loses precision in the scaling
        // itself (2.5e-323 × 0.1 rounds to 5e-324, twice its share), before weightedScore sees it.
        const normal = (w: number) => w === 0 || w >= 2.2250738585072014e-308
        fc.pre(cs.every((c) => normal(c.weight) && normal(c.weight * k)))
        expect(weightedScore(cs.map((c) => ({ ...c, weight: c.weight * k })))).toBeCloseTo(weightedScore(cs), 9)
      }),
      { numRuns: 200 }
    )
  })
})

describe("gateVerdict", () => {
  test("passes at and above the threshold, fails below it", () => {
    expect(gateVerdict({ scores: [0.7, 0.7, 0.7], threshold: 0.7, failOnRegression: true }).passed).toBe(true)
    expect(gateVerdict({ scores: [0.6, 0.8], threshold: 0.7, failOnRegression: true }).passed).toBe(true)
    const below = gateVerdict({ scores: [0.69, 0.7], threshold: 0.7, failOnRegression: true })
    expect(below.passed).toBe(false)
    expect(below.reasons[0]).toContain("below the threshold")
  })

  test("fails closed: any unjudged trace fails the gate; the score is the mean of the judged ones", () => {
    const v = gateVerdict({ scores: [1, null, 1], threshold: 0.5, failOnRegression: false })
    expect(v).toMatchObject({ passed: false, score: 1, regression: false })
    expect(v.reasons).toEqual(["1 of 3 traces could not be judged"])
    expect(gateVerdict({ scores: [null], threshold: 0, failOnRegression: false })).toMatchObject({
      passed: false,
      score: 0
    })
  })

  test(`regression: more than ${REGRESSION_TOLERANCE} below the baseline mean; fail_on_regression decides`, () => {
    const at = gateVerdict({ scores: [0.85], threshold: 0.5, failOnRegression: true, baseline: [0.9, 0.9] })
    expect(at).toMatchObject({ regression: false, passed: true, baselineScore: 0.9 })
    const past = gateVerdict({ scores: [0.84], threshold: 0.5, failOnRegression: true, baseline: [0.8, 1] })
    expect(past).toMatchObject({ regression: true, passed: false })
    expect(gateVerdict({ scores: [0.84], threshold: 0.5, failOnRegression: false, baseline: [0.9] })).toMatchObject({
      regression: true,
      passed: true
    })
    expect(
      gateVerdict({ scores: [0.84], threshold: 0.5, failOnRegression: true, baseline: [] }).baselineScore
    ).toBeUndefined()
  })

  test("property: score in [0, 1]; passing is monotone in the threshold; passed ⇔ the documented formula", () => {
    const scores = fc.array(fc.option(score01, { nil: null }), { minLength: 1, maxLength: 50 })
    fc.assert(
      fc.property(
        scores,
        score01,
        score01,
        fc.boolean(),
        fc.array(score01, { maxLength: 5 }),
        (ss, t1, t2, f, base) => {
          const [lo, hi] = t1 <= t2 ? [t1, t2] : [t2, t1]
          const vLo = gateVerdict({ scores: ss, threshold: lo, failOnRegression: f, baseline: base })
          const vHi = gateVerdict({ scores: ss, threshold: hi, failOnRegression: f, baseline: base })
          expect(vLo.score).toBeGreaterThanOrEqual(0)
          expect(vLo.score).toBeLessThanOrEqual(1)
          if (vHi.passed) expect(vLo.passed).toBe(true)
          const allJudged = ss.every((s) => s !== null)
          expect(vLo.passed).toBe(allJudged && vLo.score >= lo - 1e-9 && !(f && vLo.regression))
        }
      ),
      { numRuns: 500 }
    )
  })

  test("property: a failed run is never a silent 0: it leaves score and regression as they were and fails the gate", () => {
    const judged = fc.array(score01, { minLength: 1, maxLength: 20 })
    fc.assert(
      fc.property(
        judged,
        fc.integer({ min: 1, max: 5 }),
        score01,
        fc.boolean(),
        fc.array(score01, { maxLength: 5 }),
        (ss, failures, t, f, base) => {
          const clean = gateVerdict({ scores: ss, threshold: t, failOnRegression: f, baseline: base })
          const mixed: Array<number | null> = [...ss]
          for (let i = 0; i < failures; i++) mixed.splice((i * 7) % (mixed.length + 1), 0, null)
          const withFailures = gateVerdict({ scores: mixed, threshold: t, failOnRegression: f, baseline: base })
          expect(withFailures.score).toBe(clean.score)
          expect(withFailures.regression).toBe(clean.regression)
          expect(withFailures.baselineScore).toBe(clean.baselineScore)
          expect(withFailures.judged).toBe(ss.length)
          expect(withFailures.passed).toBe(false)
          expect(withFailures.reasons[0]).toBe(`${failures} of ${mixed.length} traces could not be judged`)
        }
      ),
      { numRuns: 300 }
    )
  })
})

describe("request schemas", () => {
  const decode = <A, I>(schema: Schema.Schema<A, I>, u: unknown) =>
    Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })(u)
  const criterion = { name: "helpful", description: "answers the question" }

  test("CreateEvaluationRequest: limits and strictness", () => {
    const ok = decode(CreateEvaluationRequest, { name: "e", criteria: [criterion] })
    expect(Either.isRight(ok) && ok.right).toMatchObject({ is_public: false, criteria: [{ weight: 1 }] })
    const bad: Array<unknown> = [
      { name: "e", criteria: [] },
      { name: "e", criteria: Array.from({ length: 11 }, (_, i) => ({ ...criterion, name: `c${i}` })) },
      { name: "e", criteria: [{ ...criterion, name: "x".repeat(101) }] },
      { name: "e", criteria: [{ ...criterion, description: "x".repeat(1001) }] },
      { name: "e", criteria: [{ ...criterion, weight: -0.1 }] },
      { name: "e", criteria: [{ ...criterion, weight: 10.01 }] },
      { name: "e", criteria: [{ ...criterion, extra: 1 }] },
      { name: "e", criteria: [criterion, criterion] },
      { name: "e", criteria: [criterion], judge_model: "m".repeat(101) },
      { name: "x".repeat(501), criteria: [criterion] },
      { name: "e", criteria: [criterion], colour: "red" },
      { name: "e", criteria: [{ name: "n" }] }
    ]
    for (const body of bad) expect(Either.isLeft(decode(CreateEvaluationRequest, body))).toBe(true)
    expect(
      Either.isRight(
        decode(CreateEvaluationRequest, {
          name: "e",
          criteria: Array.from({ length: 10 }, (_, i) => ({ ...criterion, name: `c${i}`, weight: i })),
          judge_model: "m".repeat(100),
          is_public: true
        })
      )
    ).toBe(true)
  })

  test("run and gate requests: 1..50 unique trace ids, threshold 0..1", () => {
    const id = () => crypto.randomUUID()
    const fifty = Array.from({ length: 50 }, id)
    expect(Either.isRight(decode(RunEvaluationRequest, { trace_ids: fifty }))).toBe(true)
    expect(Either.isLeft(decode(RunEvaluationRequest, { trace_ids: [...fifty, id()] }))).toBe(true)
    expect(Either.isLeft(decode(RunEvaluationRequest, { trace_ids: [] }))).toBe(true)
    const one = id()
    expect(Either.isLeft(decode(RunEvaluationRequest, { trace_ids: [one, one.toUpperCase()] }))).toBe(true)
    const gate = decode(EvaluationGateRequest, { trace_ids: [one] })
    expect(Either.isRight(gate) && gate.right).toMatchObject({ threshold: 0.7, fail_on_regression: true })
    expect(Either.isLeft(decode(EvaluationGateRequest, { trace_ids: [one], threshold: 1.01 }))).toBe(true)
    expect(Either.isLeft(decode(EvaluationGateRequest, { trace_ids: [one], judge_model: "x" }))).toBe(true)
  })
})

describe("the rubric prompt", () => {
  const span = (i: number, overrides: Record<string, unknown> = {}) => ({
    id: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
    parent_id: i === 0 ? null : "00000000-0000-4000-8000-000000000000",
    span_type: "tool_call",
    name: `step ${i}`,
    started_at: "2026-01-01T00:00:00.000Z",
    output: "x".repeat(100),
    ...overrides
  })

  test("spans render one line each, indented under their parent, within the budget", () => {
    const spans = Array.from({ length: 500 }, (_, i) => span(i))
    const text = renderSpans(spans as any, 8000)
    expect(text.length).toBeLessThanOrEqual(8000 + 100)
    expect(text).toContain("- [tool_call] step 0")
    expect(text).toContain("  - [tool_call] step 499")
    expect(text).toMatch(/… \d+ spans omitted …/)
    expect(renderSpans(spans.slice(0, 3) as any, 8000).split("\n")).toHaveLength(3)
  })

  test("the prompt names the criterion, the trace's input and output, and clips huge values", () => {
    const trace = {
      id: "t",
      status: "completed",
      name: "agent",
      input: "q".repeat(50_000),
      output: { answer: 42 },
      startedAt: "x",
      spans: [span(0, { error: "boom" })]
    }
    const [system, user] = judgeMessages({ name: "correct", description: "is right" }, trace as any)
    expect(system!.content).toContain('"score"')
    expect(user!.content).toContain("Criterion: correct")
    expect(user!.content).toContain('{"answer":42}')
    expect(user!.content).toContain("ERROR: boom")
    expect(user!.content!.length).toBeLessThan(12_000)
  })
})
