import { describe, expect, test } from "bun:test"
import { Either, FastCheck as fc } from "effect"
import {
  jsonValuesIn,
  QUOTED_ANSWER_CHARS,
  readJudgeAnswer,
  SCORE_ALIASES
} from "#src/domain/evaluation/JudgeAnswerReader"

const read = (content: string | null, criterion = "correct", toolCalls?: unknown) =>
  readJudgeAnswer({ content, toolCalls }, { criterion })

const scoreOf = (content: string | null, criterion = "correct", toolCalls?: unknown) => {
  const r = read(content, criterion, toolCalls)
  return Either.isRight(r) ? r.right.score : `malformed: ${r.left}`
}

/** Prose that cannot open a JSON value or a think block. */
const prose = fc.string({ maxLength: 80 }).map((s) => s.replace(/[{}[\]<]/g, ""))
const fence = fc.constantFrom(["", ""], ["```json\n", "\n```"], ["```\n", "\n```"], ["`", "`"])
const unit = fc.double({ min: 0, max: 1, noNaN: true })
const extraKeys = fc.dictionary(
  fc
    .string({ minLength: 1, maxLength: 10 })
    .filter(
      (k) =>
        /^[a-z]+$/.test(k) &&
        ![
          "score",
          "rating",
          "reason",
          "scale",
          "max",
          "criteria",
          "scores",
          "results",
          "evaluations",
          "ratings",
          "range",
          "result",
          "evaluation",
          "verdict",
          "output",
          "response",
          "answer",
          "assessment",
          "judgment",
          "judgement",
          "reasoning",
          "explanation",
          "rationale",
          "justification"
        ].includes(k)
    ),
  fc.jsonValue({ maxDepth: 2 }).filter((v) => typeof v !== "object" || v === null),
  { maxKeys: 3 }
)

describe("readJudgeAnswer: properties", () => {
  test("any valid {score, reason} wrapped in prose and fences, with extra keys, reads back the same", () => {
    fc.assert(
      fc.property(
        prose,
        fence,
        unit,
        fc.string({ maxLength: 200 }),
        extraKeys,
        prose,
        fc.boolean(),
        (before, [open, close], score, reason, extra, after, asString) => {
          const body = JSON.stringify({ ...extra, score: asString ? String(score) : score, reason })
          const r = read(`${before}${open}${body}${close}${after}`)
          expect(Either.isRight(r)).toBe(true)
          if (Either.isRight(r)) {
            expect(r.right.score).toBeCloseTo(score, 11)
            expect(r.right.reason).toBe(reason.trim())
          }
        }
      ),
      { numRuns: 300 }
    )
  })

  test("any finite score outside 0..1 with no declared scale is malformed, whatever its alias or form", () => {
    const outside = fc.oneof(
      fc.double({ min: 1.0000001, max: 1e6, noNaN: true }),
      fc.double({ min: -1e6, max: -1e-7, noNaN: true })
    )
    fc.assert(
      fc.property(outside, fc.constantFrom(...SCORE_ALIASES), fc.boolean(), (score, alias, asString) => {
        const r = read(JSON.stringify({ [alias]: asString ? String(score) : score, reason: "x" }))
        expect(Either.isLeft(r)).toBe(true)
      }),
      { numRuns: 300 }
    )
  })

  test("a score inside a declared scale is rescaled linearly into 0..1", () => {
    const range = fc
      .tuple(fc.integer({ min: -5, max: 5 }), fc.integer({ min: 1, max: 100 }))
      .map(([min, span]) => [min, min + span] as const)
    fc.assert(
      fc.property(
        range,
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.constantFrom("string", "array", "object"),
        ([min, max], at, form) => {
          const raw = min + at * (max - min)
          const scale = form === "string" ? `${min} to ${max}` : form === "array" ? [min, max] : { min, max }
          const r = read(JSON.stringify({ score: raw, scale, reason: "r" }))
          expect(Either.isRight(r)).toBe(true)
          if (Either.isRight(r)) expect(r.right.score).toBeCloseTo((raw - min) / (max - min), 9)
        }
      ),
      { numRuns: 200 }
    )
  })

  test("never throws; whatever it reads is a score in 0..1", () => {
    const anything = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v))
    )
    fc.assert(
      fc.property(anything, fc.option(fc.jsonValue({ maxDepth: 3 }), { nil: undefined }), (content, toolCalls) => {
        const r = read(content, "correct", toolCalls)
        if (Either.isRight(r)) {
          expect(r.right.score).toBeGreaterThanOrEqual(0)
          expect(r.right.score).toBeLessThanOrEqual(1)
        } else {
          expect(r.left.length).toBeGreaterThan(0)
        }
      }),
      { numRuns: 500 }
    )
  })
})

describe("readJudgeAnswer: rules", () => {
  test("a tool call's arguments come before the content", () => {
    const calls = [{ type: "function", function: { name: "submit", arguments: '{"score": 0.25, "reason": "tool"}' } }]
    expect(read('{"score": 0.75, "reason": "text"}', "correct", calls)).toEqual(
      Either.right({ score: 0.25, reason: "tool" })
    )
  })

  test("a per-criterion list is used only for the criterion it names; otherwise the overall score", () => {
    const answer = JSON.stringify({ overall_score: 0.5, criteria: [{ name: "Polite ", score: 0.1, reason: "curt" }] })
    expect(scoreOf(answer, "polite")).toBe(0.1)
    expect(scoreOf(answer, "correct")).toBe(0.5)
    expect(scoreOf(JSON.stringify({ criteria: [{ name: "polite", score: 0.1 }] }), "correct")).toContain(
      'does not name the criterion "correct"'
    )
    // A bare array of named entries is a per-criterion list too: the first entry is not taken for another criterion.
    expect(
      scoreOf(
        JSON.stringify([
          { criterion: "polite", score: 0.1 },
          { criterion: "correct", score: 0.9 }
        ]),
        "correct"
      )
    ).toBe(0.9)
    expect(scoreOf(JSON.stringify([{ criterion: "polite", score: 0.1 }]), "correct")).toContain("malformed")
  })

  test("nothing inside a cut or broken object is read on its own", () => {
    // Cut by max_tokens after a complete entry about another criterion: not read as this criterion's score.
    expect(scoreOf('{"criteria": [{"name": "polite", "score": 0.2}, {"name": "correct", "score": 0.')).toContain(
      "malformed"
    )
    // A balanced object that is not JSON is skipped whole, and a later one read.
    expect(scoreOf('{\'a\': {"score": 0.1}} then {"score": 0.6, "reason": "x"}')).toBe(0.6)
    expect(jsonValuesIn('{"a": 1} [x] [2] {broken')).toEqual([{ a: 1 }, [2]])
    // Nested brackets that never parse are skipped in one step each, not rescanned from every opening bracket.
    const nested = `${"[x".repeat(300_000)}${"]".repeat(300_000)} {"score": 0.4}`
    expect(scoreOf(nested)).toBe(0.4)
  })

  test("a scale is taken only when declared: in the string, by the object, or by the prompt", () => {
    expect(scoreOf('{"score": "3 out of 4"}')).toBe(0.75)
    expect(scoreOf('{"score": "7/10", "scale": "1-5"}')).toBe(0.7)
    expect(scoreOf('{"score": 9}')).toContain("outside 0..1 and the answer declares no scale")
    expect(scoreOf('{"score": 11, "scale": "1-10"}')).toContain("outside its declared scale 1..10")
    expect(scoreOf('{"score": 0.5, "scale": "10-1"}')).toContain("not a usable range")
    const prompted = readJudgeAnswer({ content: '{"score": 3}' }, { criterion: "c", scale: { min: 1, max: 5 } })
    expect(prompted).toEqual(Either.right({ score: 0.5, reason: "(the judge gave no reason)" }))
  })

  test("the malformed verdict says why and quotes the answer, clipped", () => {
    const long = `I think it is fine. ${"blah ".repeat(200)}`
    const r = read(long)
    expect(Either.isLeft(r)).toBe(true)
    if (Either.isLeft(r)) {
      expect(r.left).toStartWith("no JSON object in the answer; the judge answered: I think it is fine.")
      expect(r.left.length).toBeLessThan(QUOTED_ANSWER_CHARS + 120)
    }
    expect(read("   ")).toEqual(Either.left("the judge answered nothing"))
    expect(read(null)).toEqual(Either.left("the judge answered nothing"))
  })

  test("reasons: aliases, lists of strings, and a missing reason", () => {
    expect(read('{"score": 1, "Rationale": " ok "}')).toEqual(Either.right({ score: 1, reason: "ok" }))
    expect(read('{"score": 1, "reasoning": ["a", "b"]}')).toEqual(Either.right({ score: 1, reason: "a; b" }))
    expect(read('{"score": 0}')).toEqual(Either.right({ score: 0, reason: "(the judge gave no reason)" }))
  })
})
