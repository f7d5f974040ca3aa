import { afterEach, describe, expect, test } from "bun:test"
import { ConfigProvider, Effect, Layer } from "effect"
import { CRITERION_CONCURRENCY, Judge, type JudgeCriterion, type JudgeOutcome } from "#layers/evaluations/Judge"
import { retryNote } from "#src/domain/evaluation/JudgePrompt"
import { LlmClientLive } from "#layers/llm/OpenAiCompatibleLlm"
import { ModelPrices } from "#layers/llm/Prices"
import { costOf, DEFAULT_PRICES } from "#src/domain/pricing/Prices"
import { type FakeOpenAi, type FakeReply, type RecordedRequest, startFakeOpenAi } from "../support/FakeOpenAi.ts"

const fakes: Array<FakeOpenAi> = []
afterEach(async () => {
  await Promise.all(fakes.splice(0).map((fake) => fake.stop()))
})

/** The criterion a judge request is about (the rubric prompt names it on its own line). */
const criterionOf = (request: RecordedRequest) => /^Criterion: (.*)$/m.exec(request.body.messages[1].content)?.[1] ?? ""

const answer = (score: number, reason = `scored ${score}`): FakeReply => ({
  content: JSON.stringify({ score, reason })
})

const judgeWith = (
  env: Record<string, string>,
  criteria: ReadonlyArray<JudgeCriterion>,
  model = "gpt-4o-mini"
): Promise<JudgeOutcome> =>
  Effect.runPromise(
    Effect.flatMap(Judge, (judge) => judge.judge(criteria, trace, model)).pipe(
      Effect.provide(
        Judge.Default.pipe(
          Layer.provide([LlmClientLive, ModelPrices.Default]),
          Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
        )
      )
    )
  )

const provider = (
  reply: (criterion: string, request: RecordedRequest, call: number) => FakeReply | Promise<FakeReply>
) => {
  const fake = startFakeOpenAi((request, call) => reply(criterionOf(request), request, call))
  fakes.push(fake)
  return {
    fake,
    env: {
      TAPEDECK_LLM_BASE_URL: fake.baseUrl,
      TAPEDECK_LLM_API_KEY: "sk-x",
      TAPEDECK_LLM_RETRY_BASE_MS: "1",
      TAPEDECK_LLM_MAX_RETRIES: "0"
    }
  }
}

const trace = {
  id: "11111111-1111-4111-8111-111111111111",
  status: "completed",
  name: "travel",
  input: "Book a flight to Lisbon",
  output: "Booked TP123",
  startedAt: "2026-01-01T00:00:00.000Z",
  spans: [
    {
      id: "22222222-2222-4222-8222-222222222222",
      parent_id: null,
      span_type: "tool_call",
      name: "book_flight",
      started_at: "2026-01-01T00:00:00.000Z",
      output: "TP123"
    }
  ]
} as const as any

const criteria: ReadonlyArray<JudgeCriterion> = [
  { name: "correct", description: "the booking matches the request", weight: 3 },
  { name: "polite", description: "the answer is polite", weight: 1 },
  { name: "fast", description: "few steps", weight: 0 }
]
const scores: Record<string, number> = { correct: 1, polite: 0.2, fast: 0 }

describe("Judge", () => {
  test("asks once per criterion with the rubric prompt as JSON; the score is the weight-normalised mean", async () => {
    const { fake, env } = provider((c) => answer(scores[c]!))
    const outcome = await judgeWith(env, criteria)
    expect(outcome._tag).toBe("Judged")
    if (outcome._tag !== "Judged") return
    expect(outcome.score).toBeCloseTo((3 * 1 + 1 * 0.2) / 4, 12)
    expect(outcome.criterionScores).toEqual([
      { name: "correct", weight: 3, score: 1, reason: "scored 1" },
      { name: "polite", weight: 1, score: 0.2, reason: "scored 0.2" },
      { name: "fast", weight: 0, score: 0, reason: "scored 0" }
    ])
    expect(outcome.reasoning).toContain("polite (0.2): scored 0.2")
    expect(outcome.inputTokens).toBe(30)
    expect(outcome.outputTokens).toBe(15)
    expect(outcome.costUsd).toBe(costOf(DEFAULT_PRICES, "gpt-4o-mini", 30, 15)!)
    expect(fake.requests).toHaveLength(3)
    const body = fake.requests[0]!.body
    expect(body).toMatchObject({
      model: "gpt-4o-mini",
      temperature: 0,
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "judge_verdict",
          strict: true,
          schema: { required: ["score", "reason"], additionalProperties: false }
        }
      }
    })
    expect(body.messages[1].content).toContain("Book a flight to Lisbon")
    expect(body.messages[1].content).toContain("[tool_call] book_flight")
  }, 60_000)

  test("a malformed answer is asked again once, with the bad answer and a correction", async () => {
    let politeCalls = 0
    const { fake, env } = provider((c) =>
      c === "polite" && ++politeCalls === 1 ? { content: "sure! 0.9" } : answer(scores[c]!)
    )
    const outcome = await judgeWith(env, criteria)
    expect(outcome._tag).toBe("Judged")
    const polite = fake.requests.filter((r) => criterionOf(r) === "polite")
    expect(polite).toHaveLength(2)
    expect(polite[1]!.body.messages.at(-2)).toEqual({ role: "assistant", content: "sure! 0.9" })
    const note = polite[1]!.body.messages.at(-1)
    expect(note.role).toBe("user")
    expect(note.content).toStartWith(retryNote("no JSON object in the answer").split(".")[0]!)
    expect(note.content).toContain("no JSON object in the answer; the judge answered: sure! 0.9")
    expect(outcome.inputTokens).toBe(40) // the retry's tokens count too
  }, 60_000)

  test("two malformed answers fail the run with the reason; no third call; no score is invented", async () => {
    const { fake, env } = provider((c) =>
      c === "correct" ? { content: '{"score": 7, "reason": "great"}' } : answer(scores[c]!)
    )
    const outcome = await judgeWith(env, criteria)
    expect(outcome._tag).toBe("NotJudged")
    if (outcome._tag !== "NotJudged") return
    expect(outcome.error).toContain('criterion "correct": malformed answer twice')
    expect(outcome.error).toContain("score")
    expect("score" in outcome).toBe(false)
    expect(fake.requests.filter((r) => criterionOf(r) === "correct")).toHaveLength(2)
    expect(outcome.criterionScores.map((c) => c.name)).toEqual(["polite", "fast"])
  }, 60_000)

  test("a provider error or an unreachable provider fails the run with a clear error", async () => {
    const { env } = provider(() => ({ status: 503, errorMessage: "overloaded" }))
    const down = await judgeWith(env, criteria)
    expect(down).toMatchObject({ _tag: "NotJudged" })
    expect((down as any).error).toContain("HTTP 503: overloaded")

    const gone = startFakeOpenAi()
    await gone.stop()
    const unreachable = await judgeWith({ ...env, TAPEDECK_LLM_BASE_URL: gone.baseUrl }, criteria)
    expect(unreachable).toMatchObject({ _tag: "NotJudged" })
    expect((unreachable as any).error).toContain("could not reach the LLM provider")
  }, 60_000)

  test("no provider configured: not judged, nothing asked", async () => {
    const outcome = await judgeWith({}, criteria)
    expect(outcome).toMatchObject({ _tag: "NotJudged", inputTokens: 0 })
    expect((outcome as any).error).toContain("no LLM provider is configured")
  }, 60_000)

  test("criteria are asked concurrently, at most CRITERION_CONCURRENCY at once; an unpriced model costs null", async () => {
    let inFlight = 0
    let most = 0
    const { fake, env } = provider(async () => {
      most = Math.max(most, ++inFlight)
      await Bun.sleep(40)
      inFlight--
      return answer(0.5)
    })
    const many = Array.from({ length: 10 }, (_, i) => ({ name: `c${i}`, description: "", weight: 1 }))
    const outcome = await judgeWith(env, many, "my-local-model")
    expect(outcome).toMatchObject({ _tag: "Judged", score: 0.5, costUsd: null })
    expect(fake.requests).toHaveLength(10)
    expect(most).toBeGreaterThan(1)
    expect(most).toBeLessThanOrEqual(CRITERION_CONCURRENCY)
  }, 60_000)

  test("answers in other forms are read: extra keys, fences and prose, a string score, a tool call", async () => {
    const styles: Record<string, FakeReply> = {
      correct: {
        content:
          'Here is my verdict:\n```json\n{"score": "0.9", "reasoning": "right flight", "confidence": "high"}\n```'
      },
      polite: {
        content: null,
        toolCalls: [
          { id: "call_1", type: "function", function: { name: "verdict", arguments: '{"score":0.5,"reason":"terse"}' } }
        ]
      },
      fast: { content: '{"rating": 4, "max_score": 5, "explanation": "few steps"}' }
    }
    const { fake, env } = provider((c) => styles[c]!)
    const outcome = await judgeWith(env, criteria)
    expect(outcome).toMatchObject({
      _tag: "Judged",
      criterionScores: [
        { name: "correct", score: 0.9, reason: "right flight" },
        { name: "polite", score: 0.5, reason: "terse" },
        { name: "fast", score: 0.8, reason: "few steps" }
      ]
    })
    expect(fake.requests).toHaveLength(3)
  }, 60_000)
})

/** Runs `judge` twice on one Judge (one output-mode memory), the second time with `secondModel`. */
const judgeTwice = (env: Record<string, string>, firstModel: string, secondModel: string) =>
  Effect.runPromise(
    Effect.flatMap(Judge, (judge) =>
      Effect.all([
        judge.judge(criteria.slice(0, 1), trace, firstModel),
        judge.judge(criteria.slice(0, 1), trace, secondModel)
      ])
    ).pipe(
      Effect.provide(
        Judge.Default.pipe(
          Layer.provide([LlmClientLive, ModelPrices.Default]),
          Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
        )
      )
    )
  )

const formatOf = (request: RecordedRequest): string => request.body.response_format?.type ?? "text"

describe("Judge: structured output", () => {
  /** A provider that answers 400 naming response_format for every type in `refused`. */
  const refusing = (refused: ReadonlyArray<string>) =>
    provider((_c, request) =>
      refused.includes(formatOf(request))
        ? {
            status: 400,
            errorMessage: `Invalid parameter: 'response_format' of type '${formatOf(request)}' is not supported with this model.`
          }
        : answer(0.7)
    )

  test("json_schema refused: json_object next, remembered for the (base URL, model); another model starts over", async () => {
    const { fake, env } = refusing(["json_schema"])
    const [first, second] = await judgeTwice(env, "gpt-3.5-turbo", "gpt-3.5-turbo")
    expect(first).toMatchObject({ _tag: "Judged", score: 0.7 })
    expect(second).toMatchObject({ _tag: "Judged", score: 0.7 })
    expect(fake.requests.map(formatOf)).toEqual(["json_schema", "json_object", "json_object"])

    const other = refusing(["json_schema"])
    await judgeTwice(other.env, "model-a", "model-b")
    expect(other.fake.requests.map(formatOf)).toEqual(["json_schema", "json_object", "json_schema", "json_object"])
  }, 60_000)

  test("json_schema and json_object refused: plain text, with no response_format at all", async () => {
    const { fake, env } = refusing(["json_schema", "json_object"])
    const [first, second] = await judgeTwice(env, "llama3", "llama3")
    expect(first).toMatchObject({ _tag: "Judged", score: 0.7 })
    expect(second).toMatchObject({ _tag: "Judged", score: 0.7 })
    expect(fake.requests.map(formatOf)).toEqual(["json_schema", "json_object", "text", "text"])
    expect("response_format" in fake.requests[3]!.body).toBe(false)
  }, 60_000)

  test("a 400 that does not name the structure is the provider's answer: no step down, the run fails with it", async () => {
    const { fake, env } = provider(() => ({
      status: 400,
      errorMessage: "This model's maximum context length is 8192 tokens."
    }))
    const outcome = await judgeWith(env, criteria.slice(0, 1))
    expect(outcome).toMatchObject({ _tag: "NotJudged" })
    expect((outcome as any).error).toContain("maximum context length")
    expect(fake.requests.map(formatOf)).toEqual(["json_schema"])
  }, 60_000)
})
