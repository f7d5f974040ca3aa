import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { FakeOpenAi } from "../support/FakeOpenAi.ts"
import {
  criterionOf,
  JUDGE_STYLES,
  type JudgeStyle,
  outputModeOf,
  startFakeJudge,
  styledTraceName,
  traceNameOf
} from "../support/FakeJudge.ts"
import { span, trace } from "../support/Fixtures.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"

/**
 * Judges that answer the way real model families do, through the whole path: queued run → scores → gate
 * pass/fail → regression against baseline runs. One model refuses json_schema, as providers without structured
 * outputs do.
 */
const NO_SCHEMA_MODEL = "llama3.1:8b-no-schema"

let fake: FakeOpenAi
let server: TestServer
beforeAll(async () => {
  fake = startFakeJudge({ refusesJsonSchema: [NO_SCHEMA_MODEL] })
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: fake.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_LLM_RETRY_BASE_MS: "5",
    TAPEDECK_LLM_MAX_RETRIES: "0",
    TAPEDECK_DEFAULT_JUDGE_MODEL: "gpt-4o"
  })
}, 120_000)
afterAll(async () => {
  await server.stop()
  await fake.stop()
}, 60_000)

const CRITERIA = [
  { name: "correct", description: "the booking matches the request", weight: 2 },
  { name: "polite", description: "the answer is polite" }
]

const recordTrace = async (style: JudgeStyle, score: number) => {
  const root = span({ span_type: "action", name: "agent" })
  const t = trace({
    name: styledTraceName(style, score),
    status: "completed",
    input: "Book a flight to Lisbon",
    output: "Booked TP123",
    spans: [root, span({ parent_id: root.id, span_type: "tool_call", name: "book", output: "TP123" })]
  })
  expect((await server.post("/api/v1/traces", t)).status).toBe(200)
  return (t.id as string).toLowerCase()
}

const createEvaluation = async (judgeModel?: string) => {
  const response = await server.post("/api/v1/evaluations", {
    name: "judges",
    criteria: CRITERIA,
    ...(judgeModel === undefined ? {} : { judge_model: judgeModel })
  })
  expect(response.status).toBe(200)
  return ((await response.json()) as any).id as string
}

const gate = async (evaluationId: string, body: Record<string, unknown>) => {
  const response = await server.post(`/api/v1/evaluations/${evaluationId}/gate`, body)
  expect(response.status).toBe(200)
  return (await response.json()) as any
}

/** Queues runs for the traces and waits until every one of them has finished. */
const runAndSettle = async (evaluationId: string, traceIds: ReadonlyArray<string>) => {
  const queued = await server.post(`/api/v1/evaluations/${evaluationId}/run`, { trace_ids: traceIds })
  expect(queued.status).toBe(200)
  const ids = new Set(((await queued.json()) as any).runs.map((r: any) => r.id))
  const deadline = Date.now() + 30_000
  for (;;) {
    const detail = (await (await server.get(`/api/v1/evaluations/${evaluationId}`)).json()) as any
    const mine = detail.runs.filter((r: any) => ids.has(r.id))
    if (mine.length === ids.size && mine.every((r: any) => r.status === "completed" || r.status === "failed")) {
      return traceIds.map((t) => mine.find((r: any) => r.traceId === t))
    }
    if (Date.now() > deadline) throw new Error(`runs did not finish: ${JSON.stringify(mine)}`)
    await Bun.sleep(50)
  }
}

const READABLE_STYLES = (Object.keys(JUDGE_STYLES) as Array<JudgeStyle>).filter((s) => s !== "python_dict")

describe("every answer style, end to end", () => {
  for (const style of READABLE_STYLES) {
    test(`${style}: run → scores → gate pass and fail → regression against baselines`, async () => {
      const evaluationId = await createEvaluation()
      const [base1, base2] = [await recordTrace(style, 0.9), await recordTrace(style, 0.8)]

      // Queued runs are scored from the answers in this style.
      const runs = await runAndSettle(evaluationId, [base1, base2])
      expect(runs.map((r) => [r.status, r.score, r.error])).toEqual([
        ["completed", 0.9, null],
        ["completed", 0.8, null]
      ])
      expect(runs[0].criterionScores).toEqual([
        { name: "correct", weight: 2, score: 0.9, reason: "correct judged 0.9" },
        { name: "polite", weight: 1, score: 0.9, reason: "polite judged 0.9" }
      ])

      // The gate passes at its threshold and fails above it, reusing those runs.
      const passed = await gate(evaluationId, { trace_ids: [base1, base2], threshold: 0.85 })
      expect(passed).toMatchObject({ passed: true, score: 0.85, judged_traces: 2, failed_runs: [], reasons: [] })
      expect(passed.runs.every((r: any) => r.reused)).toBe(true)
      const failed = await gate(evaluationId, { trace_ids: [base1, base2], threshold: 0.86 })
      expect(failed).toMatchObject({ passed: false, score: 0.85, regression: false, failed_runs: [] })

      // Against the completed runs as baselines: a worse trace regresses, a close one does not.
      const baseline_run_ids = runs.map((r) => r.id)
      const worse = await recordTrace(style, 0.7)
      const regressed = await gate(evaluationId, { trace_ids: [worse], threshold: 0.5, baseline_run_ids })
      expect(regressed).toMatchObject({ passed: false, regression: true, score: 0.7, baseline_score: 0.85 })
      const close = await recordTrace(style, 0.82)
      expect(await gate(evaluationId, { trace_ids: [close], threshold: 0.5, baseline_run_ids })).toMatchObject({
        passed: true,
        regression: false,
        score: 0.82
      })
    }, 60_000)
  }
})

describe("an unreadable judge and a provider without json_schema", () => {
  test("an answer never readable fails its run with the answer quoted; the gate fails on it, regression unaffected", async () => {
    const evaluationId = await createEvaluation()
    const [good] = await runAndSettle(evaluationId, [await recordTrace("gpt4o_json_schema", 0.9)])
    const unreadable = await recordTrace("python_dict", 0.9)
    const before = fake.requests.length
    const [bad] = await runAndSettle(evaluationId, [unreadable])
    expect(bad).toMatchObject({ status: "failed", score: null })
    expect(bad.error).toContain("malformed answer twice")
    expect(bad.error).toContain("the judge answered: {'score': 0.9, 'reason': 'looks fine'}")
    // Asked once and retried once per criterion, with the reason in the retry.
    const asked = fake.requests.slice(before).filter((r) => traceNameOf(r) === styledTraceName("python_dict", 0.9))
    expect(asked).toHaveLength(4)
    expect(
      asked
        .filter((r) => r.body.messages.length === 4)
        .every((r) => r.body.messages[3].content.includes("could not be read"))
    ).toBe(true)

    const verdict = await gate(evaluationId, {
      trace_ids: [good.traceId, unreadable],
      threshold: 0.5,
      baseline_run_ids: [good.id]
    })
    expect(verdict).toMatchObject({ passed: false, score: 0.9, regression: false, judged_traces: 1 })
    expect(verdict.failed_runs).toHaveLength(1)
    expect(verdict.failed_runs[0]).toMatchObject({ trace_id: unreadable, run_id: verdict.runs[1].id })
    expect(verdict.failed_runs[0].error).toContain("malformed answer twice")
    expect(verdict.reasons).toEqual(["1 of 2 traces could not be judged"])
  }, 60_000)

  test("json_schema refused: json_object is used and remembered for the model, through runs and gates", async () => {
    const evaluationId = await createEvaluation(NO_SCHEMA_MODEL)
    const schemaFirst = await createEvaluation("gpt-4o-mini")
    const forModel = (model: string) => fake.requests.filter((r) => r.body?.model === model)

    const [first] = await runAndSettle(evaluationId, [await recordTrace("ollama_string_score", 0.6)])
    expect(first).toMatchObject({ status: "completed", score: 0.6 })
    // The two criteria asked at once may both pay the refusal; never more.
    const refused = forModel(NO_SCHEMA_MODEL).filter((r) => outputModeOf(r) === "json_schema").length
    expect(refused).toBeGreaterThanOrEqual(1)
    expect(refused).toBeLessThanOrEqual(CRITERIA.length)

    const more = [await recordTrace("ollama_string_score", 0.8), await recordTrace("claude_gateway_prose_fence", 0.7)]
    const runs = await runAndSettle(evaluationId, more)
    expect(runs.map((r) => r.score)).toEqual([0.8, 0.7])
    const verdict = await gate(evaluationId, {
      trace_ids: [first.traceId, ...more],
      threshold: 0.7,
      baseline_run_ids: [first.id]
    })
    expect(verdict).toMatchObject({ passed: true, score: 0.7, regression: false })
    expect(forModel(NO_SCHEMA_MODEL).filter((r) => outputModeOf(r) === "json_schema")).toHaveLength(refused)
    expect(forModel(NO_SCHEMA_MODEL).filter((r) => outputModeOf(r) === "json_object").length).toBeGreaterThanOrEqual(6)

    // Another model on the same provider is not affected by what this one refused.
    await runAndSettle(schemaFirst, [await recordTrace("gpt4o_json_schema", 0.5)])
    expect(forModel("gpt-4o-mini").map(outputModeOf)).toEqual(["json_schema", "json_schema"])
    expect(forModel("gpt-4o-mini").map(criterionOf).sort()).toEqual(["correct", "polite"])
  }, 60_000)
})
