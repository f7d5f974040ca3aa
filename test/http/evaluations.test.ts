import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { costOf, DEFAULT_PRICES } from "#src/domain/pricing/Prices"
import { startFakeOpenAi, type FakeOpenAi, type FakeReply, type RecordedRequest } from "../support/FakeOpenAi.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { sqlOn, until } from "../support/Until.ts"

/**
 * The fake judge answers by the trace's name: "q:<score>" scores every criterion <score>; "mix" scores
 * correct 1, polite 0.2, fast 0; "malformed" answers nonsense about "polite"; "down" answers HTTP 500.
 */
const MIX: Record<string, number> = { correct: 1, polite: 0.2, fast: 0 }
const userPrompt = (r: RecordedRequest): string => r.body?.messages?.[1]?.content ?? ""
const traceNameOf = (r: RecordedRequest) => /^Trace: (.*) — status/m.exec(userPrompt(r))?.[1] ?? ""
const criterionOf = (r: RecordedRequest) => /^Criterion: (.*)$/m.exec(userPrompt(r))?.[1] ?? ""
const judgeReply = (r: RecordedRequest): FakeReply => {
  const name = traceNameOf(r)
  const criterion = criterionOf(r)
  if (name === "down") return { status: 500, errorMessage: "judge is down" }
  if (name === "malformed" && criterion === "polite") return { content: "I would say 0.7" }
  const score = name.startsWith("q:") ? Number(name.slice(2)) : (MIX[criterion] ?? 0.5)
  return { content: JSON.stringify({ score, reason: `${criterion} looks ${score}` }) }
}

let fake: FakeOpenAi
let server: TestServer
beforeAll(async () => {
  fake = startFakeOpenAi((request) => judgeReply(request))
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: fake.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_LLM_RETRY_BASE_MS: "5",
    TAPEDECK_LLM_MAX_RETRIES: "1",
    TAPEDECK_DEFAULT_JUDGE_MODEL: "gpt-4.1-mini"
  })
}, 120_000)
afterAll(async () => {
  await server.stop()
  await fake.stop()
}, 60_000)

const CRITERIA = [
  { name: "correct", description: "the answer is correct", weight: 3 },
  { name: "polite", description: "the answer is polite" },
  { name: "fast", description: "few steps", weight: 0 }
]

const callsFor = (traceName: string) => fake.requests.filter((r) => traceNameOf(r) === traceName)

const recordTrace = async (name: string, key = KEY_A) => {
  const root = span({ span_type: "action", name: "agent" })
  const t = trace({
    name,
    status: "completed",
    input: "Book a flight to Lisbon",
    output: "Booked TP123",
    spans: [
      root,
      span({ parent_id: root.id, name: "plan", model: "gpt-4o-mini", output: "search" }),
      span({ parent_id: root.id, span_type: "tool_call", name: "search", output: { results: 3 } })
    ]
  })
  expect((await server.post("/api/v1/traces", t, key)).status).toBe(200)
  return t.id as string
}

const createEvaluation = async (body: Record<string, unknown> = {}, key = KEY_A) => {
  const response = await server.post("/api/v1/evaluations", { name: "quality", criteria: CRITERIA, ...body }, key)
  expect(response.status).toBe(200)
  return (await response.json()) as any
}

const json = async (response: Response) => ({ status: response.status, body: (await response.json()) as any })

/** Polls the detail until every run is finished (the job worker polls every 50 ms in tests). */
const settledRuns = async (evaluationId: string, count: number, key = KEY_A) => {
  const deadline = Date.now() + 20_000
  for (;;) {
    const detail = (await (await server.get(`/api/v1/evaluations/${evaluationId}`, key)).json()) as any
    const done = detail.runs.filter((r: any) => r.status === "completed" || r.status === "failed")
    if (detail.runs.length >= count && done.length === detail.runs.length) return detail.runs as Array<any>
    if (Date.now() > deadline) throw new Error(`runs did not finish: ${JSON.stringify(detail.runs)}`)
    await Bun.sleep(50)
  }
}

const expectValidation = async (response: Response) => {
  const { status, body } = await json(response)
  expect(status).toBe(400)
  expect(body).toMatchObject({ code: "validation_failed", retryable: false })
  expect(typeof body.error).toBe("string")
}

const expectNotFound = async (response: Response) => {
  const { status, body } = await json(response)
  expect(status).toBe(404)
  expect(body).toMatchObject({ code: "not_found", retryable: false })
}

describe("evaluations CRUD", () => {
  test("create answers the exact camelCase shape with defaults; get adds runs; delete is soft and owner-only", async () => {
    const created = await createEvaluation({
      description: "how good",
      project_id: "AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA"
    })
    expect(Object.keys(created).sort()).toEqual([
      "createdAt",
      "criteria",
      "description",
      "id",
      "isPublic",
      "judgeModel",
      "name",
      "projectId"
    ])
    expect(created).toMatchObject({
      name: "quality",
      description: "how good",
      projectId: "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa",
      judgeModel: "gpt-4.1-mini",
      isPublic: false,
      criteria: [
        { name: "correct", description: "the answer is correct", weight: 3 },
        { name: "polite", description: "the answer is polite", weight: 1 },
        { name: "fast", description: "few steps", weight: 0 }
      ]
    })
    expect(Date.parse(created.createdAt)).toBeGreaterThan(0)
    const detail = await json(await server.get(`/api/v1/evaluations/${created.id}`))
    expect(detail).toEqual({ status: 200, body: { ...created, runs: [] } })

    const bare = await createEvaluation({ judge_model: "my-judge" })
    expect(bare).toMatchObject({ description: null, projectId: null, judgeModel: "my-judge" })

    await expectNotFound(await server.request("DELETE", `/api/v1/evaluations/${created.id}`, { key: KEY_B }))
    expect(await json(await server.request("DELETE", `/api/v1/evaluations/${created.id}`))).toEqual({
      status: 200,
      body: { deleted: true }
    })
    await expectNotFound(await server.get(`/api/v1/evaluations/${created.id}`))
    await expectNotFound(await server.request("DELETE", `/api/v1/evaluations/${created.id}`))
    const listed = (await (await server.get("/api/v1/evaluations?limit=100")).json()) as any
    expect(listed.items.map((e: any) => e.id)).not.toContain(created.id)
  }, 60_000)

  test("list: newest first, limit and offset, exact total", async () => {
    const ids = [] as Array<string>
    for (let i = 0; i < 3; i++) ids.push((await createEvaluation({ name: `page ${i}` })).id)
    const all = (await (await server.get("/api/v1/evaluations?limit=100")).json()) as any
    const first = (await (await server.get("/api/v1/evaluations?limit=2")).json()) as any
    expect(first).toMatchObject({ limit: 2, offset: 0, total: all.total })
    expect(first.items.map((e: any) => e.id)).toEqual([ids[2], ids[1]])
    const second = (await (await server.get("/api/v1/evaluations?limit=2&offset=2")).json()) as any
    expect(second.items[0].id).toBe(ids[0])
    expect(Object.keys(first).sort()).toEqual(["items", "limit", "offset", "total"])
    const defaults = (await (await server.get("/api/v1/evaluations")).json()) as any
    expect(defaults).toMatchObject({ limit: 50, offset: 0 })
    for (const q of ["limit=0", "limit=101", "offset=-1", "limit=abc", "colour=red"]) {
      await expectValidation(await server.get(`/api/v1/evaluations?${q}`))
    }
  }, 60_000)

  test("requests are strict and limited; every bad input is a 400 with the error body", async () => {
    const c = { name: "n", description: "d" }
    const bad: Array<unknown> = [
      { name: "e", criteria: [] },
      { name: "e", criteria: Array.from({ length: 11 }, (_, i) => ({ ...c, name: `c${i}` })) },
      { name: "e", criteria: [{ ...c, name: "x".repeat(101) }] },
      { name: "e", criteria: [{ ...c, name: "" }] },
      { name: "e", criteria: [{ ...c, description: "x".repeat(1001) }] },
      { name: "e", criteria: [{ ...c, weight: 10.5 }] },
      { name: "e", criteria: [{ ...c, weight: -1 }] },
      { name: "e", criteria: [{ ...c, weight: "1" }] },
      { name: "e", criteria: [{ ...c, colour: "red" }] },
      { name: "e", criteria: [c, c] },
      { name: "e", criteria: [c], judge_model: "m".repeat(101) },
      { name: "e", criteria: [c], judge_model: "" },
      { name: "x".repeat(501), criteria: [c] },
      { name: "e", criteria: [c], is_public: "yes" },
      { name: "e", criteria: [c], project_id: "nope" },
      { name: "e", criteria: [c], extra: 1 },
      { criteria: [c] },
      { name: "e\u0000", criteria: [c] },
      [],
      "{not json"
    ]
    for (const body of bad) await expectValidation(await server.post("/api/v1/evaluations", body))
    expect(
      (
        await server.post("/api/v1/evaluations", {
          name: "x".repeat(500),
          criteria: Array.from({ length: 10 }, (_, i) => ({
            name: `${i}`.padEnd(100, "n"),
            description: "d".repeat(1000),
            weight: 10
          })),
          judge_model: "m".repeat(100)
        })
      ).status
    ).toBe(200)
    await expectValidation(await server.get("/api/v1/evaluations/not-a-uuid"))
    const e = await createEvaluation()
    const t = await recordTrace("q:1")
    const fifty = Array.from({ length: 50 }, uuid)
    for (const route of ["run", "gate"]) {
      const path = `/api/v1/evaluations/${e.id}/${route}`
      await expectValidation(await server.post(path, { trace_ids: [] }))
      await expectValidation(await server.post(path, { trace_ids: [...fifty, t] }))
      await expectValidation(await server.post(path, { trace_ids: [t, t.toUpperCase()] }))
      await expectValidation(await server.post(path, { trace_ids: ["nope"] }))
      await expectValidation(await server.post(path, { trace_ids: [t], extra: true }))
      await expectValidation(await server.post(path, {}))
    }
    await expectValidation(
      await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [t], judge_model: "m".repeat(101) })
    )
    await expectValidation(await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [t], threshold: 1.5 }))
    await expectValidation(await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [t], threshold: -0.1 }))
    await expectValidation(await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [t], judge_model: "x" }))
    await expectValidation(
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [t], baseline_run_ids: ["x"] })
    )
  }, 60_000)
})

test("GET /openapi.json documents the evaluation routes", async () => {
  const spec = (await (await fetch(`${server.url}/openapi.json`)).json()) as any
  for (const path of [
    "/api/v1/evaluations",
    "/api/v1/evaluations/{evaluationId}",
    "/api/v1/evaluations/{evaluationId}/run",
    "/api/v1/evaluations/{evaluationId}/gate"
  ]) {
    expect(spec.paths[path]).toBeDefined()
  }
  expect(Object.keys(spec.paths["/api/v1/evaluations/{evaluationId}"]).sort()).toEqual(["delete", "get"])
  const schemas = spec.components.schemas
  expect(schemas.RunEvaluationResult).toMatchObject({
    required: ["evaluation_id", "runs", "status"],
    additionalProperties: false
  })
  expect(schemas.RunEvaluationResult.properties.status.enum).toEqual(["running"])
  expect(schemas.RunEvaluationResult.properties.runs.items).toMatchObject({
    required: ["id", "traceId", "status"],
    additionalProperties: false
  })
  expect(schemas.EvaluationCriterion).toMatchObject({ required: ["name", "description"], additionalProperties: false })
  expect(schemas.EvaluationCriterion.properties).toMatchObject({
    name: { maxLength: 100 },
    description: { maxLength: 1000 },
    weight: { minimum: 0, maximum: 10 }
  })
  expect(schemas.CreateEvaluationRequest).toMatchObject({ required: ["name", "criteria"], additionalProperties: false })
  expect(schemas.CreateEvaluationRequest.properties).toMatchObject({
    name: { maxLength: 500 },
    criteria: { minItems: 1, maxItems: 10 },
    judge_model: { maxLength: 100 }
  })
  for (const name of ["RunEvaluationRequest", "EvaluationGateRequest"]) {
    expect(schemas[name]).toMatchObject({ required: ["trace_ids"], additionalProperties: false })
    expect(schemas[name].properties.trace_ids).toMatchObject({ minItems: 1, maxItems: 50, uniqueItems: true })
  }
  expect(schemas.EvaluationGateRequest.properties.threshold).toMatchObject({ minimum: 0, maximum: 1 })
  expect(schemas.EvaluationGateResult.required).toEqual(
    expect.arrayContaining(["passed", "score", "threshold", "regression", "runs"])
  )
  expect(schemas.EvaluationGateResult.properties).toMatchObject({
    score: { minimum: 0, maximum: 1 },
    threshold: { minimum: 0, maximum: 1 }
  })
  for (const path of [
    "/api/v1/eval-rules",
    "/api/v1/eval-rules/{id}",
    "/api/v1/eval-rules/{id}/deliveries",
    "/api/v1/insights"
  ]) {
    expect(spec.paths[path]).toBeDefined()
  }
}, 60_000)

describe("runs", () => {
  test("one queued run per owned trace, strict answer; the job judges it to completed with score, tokens and cost", async () => {
    const e = await createEvaluation()
    const mine = await recordTrace("mix")
    const foreign = await recordTrace("mix", KEY_B)
    // An upper-case id in the path names the same evaluation; the answer carries it as stored.
    const { status, body } = await json(
      await server.post(`/api/v1/evaluations/${e.id.toUpperCase()}/run`, { trace_ids: [mine, foreign, uuid()] })
    )
    expect(status).toBe(200)
    expect(Object.keys(body).sort()).toEqual(["evaluation_id", "runs", "status"])
    expect(body.evaluation_id).toBe(e.id)
    expect(body.status).toBe("running")
    expect(body.runs).toHaveLength(1)
    expect(Object.keys(body.runs[0]).sort()).toEqual(["id", "status", "traceId"])
    expect(body.runs[0]).toMatchObject({ traceId: mine, status: "queued" })

    const [run] = await settledRuns(e.id, 1)
    expect(run).toMatchObject({
      id: body.runs[0].id,
      traceId: mine,
      status: "completed",
      judgeModel: "gpt-4.1-mini",
      inputTokens: 30,
      outputTokens: 15,
      costUsd: costOf(DEFAULT_PRICES, "gpt-4.1-mini", 30, 15),
      error: null
    })
    expect(run.score).toBeCloseTo((3 * 1 + 1 * 0.2 + 0 * 0) / 4, 12)
    expect(run.criterionScores).toEqual([
      { name: "correct", weight: 3, score: 1, reason: "correct looks 1" },
      { name: "polite", weight: 1, score: 0.2, reason: "polite looks 0.2" },
      { name: "fast", weight: 0, score: 0, reason: "fast looks 0" }
    ])
    expect(run.reasoning).toContain("correct (1): correct looks 1")
    expect(Date.parse(run.completedAt)).toBeGreaterThanOrEqual(Date.parse(run.createdAt))
    expect(Object.keys(run).sort()).toEqual([
      "completedAt",
      "costUsd",
      "createdAt",
      "criterionScores",
      "error",
      "id",
      "inputTokens",
      "judgeModel",
      "outputTokens",
      "reasoning",
      "score",
      "status",
      "traceId"
    ])
  }, 60_000)

  test("no owned trace → 404; a judge_model override is used and recorded; the history is newest first", async () => {
    const e = await createEvaluation()
    const foreign = await recordTrace("q:0.5", KEY_B)
    await expectNotFound(await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [foreign, uuid()] }))
    await expectNotFound(await server.post(`/api/v1/evaluations/${uuid()}/run`, { trace_ids: [foreign] }))

    const a = await recordTrace("q:0.4")
    const b = await recordTrace("q:0.6")
    const first = (await (await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [a] })).json()) as any
    await settledRuns(e.id, 1)
    const second = (await (
      await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [b], judge_model: "gpt-4o" })
    ).json()) as any
    const runs = await settledRuns(e.id, 2)
    expect(runs.map((r: any) => r.id)).toEqual([second.runs[0].id, first.runs[0].id])
    expect(runs[0]).toMatchObject({ judgeModel: "gpt-4o", status: "completed", score: 0.6 })
    expect(callsFor("q:0.6").every((r) => r.body.model === "gpt-4o")).toBe(true)
  }, 60_000)

  test("a run whose worker died on every attempt is failed when its job is dead-lettered, not left running", async () => {
    const e = await createEvaluation()
    const t = await recordTrace("q:0.6")
    const queued = (await (await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [t] })).json()) as any
    const runId = queued.runs[0].id as string
    await settledRuns(e.id, 1)
    const sql = sqlOn(server)
    const jobStatus = async () =>
      (
        await sql<{ status: string }>(
          `SELECT status FROM jobs WHERE kind = 'evaluation.run' AND payload->>'runId' = $1`,
          runId
        )
      ).map((j) => j.status)
    await until(
      async () => ((await jobStatus()).join() === "completed" ? true : undefined),
      "the run's job to complete"
    )
    // As a process dying mid-run on its last attempt leaves them: the run running, the job's lease run out.
    await sql(`UPDATE evaluation_runs SET status = 'running', score = NULL, completed_at = NULL WHERE id = $1`, runId)
    await sql(
      `UPDATE jobs SET status = 'running', attempts = max_attempts, locked_until = now() - interval '1 second'
       WHERE kind = 'evaluation.run' AND payload->>'runId' = $1`,
      runId
    )
    const [run] = await settledRuns(e.id, 1)
    expect(run).toMatchObject({
      id: runId,
      status: "failed",
      score: null,
      error: "internal error: the worker running it stopped on every attempt"
    })
    expect(await jobStatus()).toEqual(["dead_letter"])
  }, 60_000)

  test("the run job is idempotent: run again after it finished it changes nothing; a run its dead worker left running is judged once more", async () => {
    const e = await createEvaluation()
    const t = await recordTrace("q:0.35")
    const queued = (await (await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [t] })).json()) as any
    const runId = queued.runs[0].id as string
    const [done] = await settledRuns(e.id, 1)
    const calls = callsFor("q:0.35").length
    const sql = sqlOn(server)
    const requeue = async (runStatus?: string) => {
      if (runStatus !== undefined)
        await sql(`UPDATE evaluation_runs SET status = $1, score = NULL WHERE id = $2`, runStatus, runId)
      await sql(
        `UPDATE jobs SET status = 'queued', run_at = now(), locked_until = NULL WHERE kind = 'evaluation.run' AND payload->>'runId' = $1`,
        runId
      )
    }
    const jobDone = () =>
      until(async () => {
        const rows = await sql<{ status: string }>(
          `SELECT status FROM jobs WHERE kind = 'evaluation.run' AND payload->>'runId' = $1`,
          runId
        )
        return rows.length === 1 && rows[0]!.status === "completed" ? true : undefined
      }, "the run's job to run again")
    await requeue()
    await jobDone()
    expect(await settledRuns(e.id, 1)).toEqual([done])
    expect(callsFor("q:0.35").length).toBe(calls)

    await requeue("running")
    await jobDone()
    const [again] = await settledRuns(e.id, 1)
    expect(again).toMatchObject({ id: runId, status: "completed", score: 0.35 })
    expect(callsFor("q:0.35").length).toBe(2 * calls)
  }, 60_000)

  test("a malformed judge answer is asked again once, then the run fails with the reason and no score", async () => {
    const e = await createEvaluation()
    const t = await recordTrace("malformed")
    await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [t] })
    const [run] = await settledRuns(e.id, 1)
    expect(run).toMatchObject({ status: "failed", score: null, reasoning: null })
    expect(run.error).toContain('criterion "polite": malformed answer twice')
    expect(callsFor("malformed").filter((r) => criterionOf(r) === "polite")).toHaveLength(2)
    expect(run.inputTokens).toBe(40)
  }, 60_000)

  test("a provider that is down fails the run with a clear error", async () => {
    const e = await createEvaluation()
    const t = await recordTrace("down")
    await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [t] })
    const [run] = await settledRuns(e.id, 1)
    expect(run).toMatchObject({ status: "failed", score: null })
    expect(run.error).toContain("HTTP 500: judge is down")
  }, 60_000)
})

describe("visibility", () => {
  test("a private evaluation is missing for other accounts on every route", async () => {
    const e = await createEvaluation()
    const theirs = await recordTrace("q:0.9", KEY_B)
    await expectNotFound(await server.get(`/api/v1/evaluations/${e.id}`, KEY_B))
    await expectNotFound(await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [theirs] }, KEY_B))
    await expectNotFound(await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [theirs] }, KEY_B))
    await expectNotFound(await server.request("DELETE", `/api/v1/evaluations/${e.id}`, { key: KEY_B }))
    const listed = (await (await server.get("/api/v1/evaluations?limit=100", KEY_B)).json()) as any
    expect(listed.items.map((x: any) => x.id)).not.toContain(e.id)
  }, 60_000)

  test("a public evaluation is listed, read, run and gated by everyone; runs stay with the account that made them", async () => {
    const e = await createEvaluation({ is_public: true, name: "shared" })
    expect(e.isPublic).toBe(true)
    const listed = (await (await server.get("/api/v1/evaluations?limit=100", KEY_B)).json()) as any
    expect(listed.items.map((x: any) => x.id)).toContain(e.id)
    const theirs = await recordTrace("q:0.9", KEY_B)
    const mine = await recordTrace("q:0.3")
    expect((await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [theirs] }, KEY_B)).status).toBe(200)
    const runs = await settledRuns(e.id, 1, KEY_B)
    expect(runs[0]).toMatchObject({ traceId: theirs, status: "completed", score: 0.9 })
    // The owner does not see B's run, and B cannot run the owner's trace.
    expect(((await (await server.get(`/api/v1/evaluations/${e.id}`)).json()) as any).runs).toEqual([])
    await expectNotFound(await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [mine] }, KEY_B))
    await expectNotFound(await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [mine] }, KEY_B))
    const gate = await json(await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [theirs] }, KEY_B))
    expect(gate.body).toMatchObject({ passed: true, score: 0.9 })
    // A's baseline cannot be B's run.
    await expectNotFound(
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [mine], baseline_run_ids: [runs[0].id] })
    )
    await expectNotFound(await server.request("DELETE", `/api/v1/evaluations/${e.id}`, { key: KEY_B }))
    expect((await server.get(`/api/v1/evaluations/${e.id}`, KEY_B)).status).toBe(200)
  }, 60_000)
})

describe("gate", () => {
  test("passes at the threshold, fails just above it; judges once, then reuses the completed runs", async () => {
    const e = await createEvaluation()
    const hi = await recordTrace("q:0.9")
    const lo = await recordTrace("q:0.7")
    const before = fake.requests.length
    const pass = await json(
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [hi, lo], threshold: 0.8 })
    )
    expect(pass.status).toBe(200)
    expect(pass.body).toMatchObject({
      passed: true,
      threshold: 0.8,
      regression: false,
      regression_tolerance: 0.05,
      judge_model: "gpt-4.1-mini",
      reasons: []
    })
    expect(pass.body.score).toBeCloseTo(0.8, 12)
    expect(pass.body.runs.map((r: any) => [r.traceId, r.status, r.score, r.reused])).toEqual([
      [hi, "completed", 0.9, false],
      [lo, "completed", 0.7, false]
    ])
    expect(fake.requests.length - before).toBe(6)
    expect(pass.body.baseline_score).toBeUndefined()

    const fail = await json(
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [hi, lo], threshold: 0.81 })
    )
    expect(fail.body).toMatchObject({ passed: false, threshold: 0.81 })
    expect(fail.body.reasons[0]).toContain("below the threshold")
    expect(fail.body.runs.map((r: any) => r.reused)).toEqual([true, true])
    expect(fail.body.runs.map((r: any) => r.id)).toEqual(pass.body.runs.map((r: any) => r.id))
    expect(fake.requests.length - before).toBe(6)
    // The gate's runs are stored: they are the evaluation's history.
    const history = ((await (await server.get(`/api/v1/evaluations/${e.id}`)).json()) as any).runs
    expect(history.map((r: any) => r.id).sort()).toEqual(pass.body.runs.map((r: any) => r.id).sort())
    // Default threshold 0.7.
    expect(
      (await (await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [lo] })).json()) as any
    ).toMatchObject({ passed: true, threshold: 0.7 })
  }, 60_000)

  test("a trace that changed since its run is judged again", async () => {
    const e = await createEvaluation()
    const t = await recordTrace("q:0.5")
    const first = (await (await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [t] })).json()) as any
    expect((await server.request("PATCH", `/api/v1/traces/${t}`, { body: { output: "changed" } })).status).toBe(200)
    const second = (await (await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [t] })).json()) as any
    expect(second.runs[0].reused).toBe(false)
    expect(second.runs[0].id).not.toBe(first.runs[0].id)
  }, 60_000)

  test("every trace must be owned: a foreign or missing trace is a 404 and nothing is judged", async () => {
    const e = await createEvaluation()
    const mine = await recordTrace("q:1")
    const foreign = await recordTrace("q:1", KEY_B)
    const before = fake.requests.length
    await expectNotFound(await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [mine, foreign] }))
    await expectNotFound(await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [mine, uuid()] }))
    await expectNotFound(await server.post(`/api/v1/evaluations/${uuid()}/gate`, { trace_ids: [mine] }))
    expect(fake.requests.length).toBe(before)
  }, 60_000)

  test("fails closed: a trace the judge cannot score fails the gate, with the reason in its run", async () => {
    const e = await createEvaluation()
    const good = await recordTrace("q:1")
    const down = await recordTrace("down")
    const bad = await recordTrace("malformed")
    const { body } = await json(
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [good, down, bad], threshold: 0 })
    )
    expect(body).toMatchObject({ passed: false, score: 1 })
    expect(body.reasons).toEqual(["2 of 3 traces could not be judged"])
    expect(body.runs[1]).toMatchObject({ status: "failed", score: null, reused: false })
    expect(body.runs[1].error).toContain("HTTP 500")
    expect(body.runs[2].error).toContain("malformed answer twice")
    // Per trace, which run failed and why; the score is the judged trace's alone, not dragged down by a 0.
    expect(body.judged_traces).toBe(1)
    expect(body.failed_runs).toEqual(
      [1, 2].map((i) => ({ trace_id: body.runs[i].traceId, run_id: body.runs[i].id, error: body.runs[i].error }))
    )
    expect(body.runs.map((r: any) => r.traceId)).toEqual([good, down, bad].map((id) => id.toLowerCase()))
    // Failed runs are never reused: the next gate asks again.
    const before = callsFor("down").length
    await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [down] })
    expect(callsFor("down").length).toBeGreaterThan(before)
  }, 60_000)

  test("regression against baseline runs: more than 0.05 below their mean; fail_on_regression decides", async () => {
    const e = await createEvaluation()
    const base1 = await recordTrace("q:0.95")
    const base2 = await recordTrace("q:0.85")
    const baseline = (await (
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [base1, base2] })
    ).json()) as any
    const baselineIds = baseline.runs.map((r: any) => r.id)

    const worse = await recordTrace("q:0.84")
    const regressed = (await (
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [worse], baseline_run_ids: baselineIds })
    ).json()) as any
    expect(regressed).toMatchObject({ passed: false, regression: true, score: 0.84, baseline_score: 0.9 })
    expect(regressed.reasons.join()).toContain("regressed")
    const tolerated = (await (
      await server.post(`/api/v1/evaluations/${e.id}/gate`, {
        trace_ids: [worse],
        baseline_run_ids: baselineIds,
        fail_on_regression: false
      })
    ).json()) as any
    expect(tolerated).toMatchObject({ passed: true, regression: true })

    const same = await recordTrace("q:0.86")
    const fine = (await (
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [same], baseline_run_ids: baselineIds })
    ).json()) as any
    expect(fine).toMatchObject({ passed: true, regression: false, baseline_score: 0.9 })

    // Baselines must be this account's scored runs of this evaluation.
    await expectNotFound(
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [same], baseline_run_ids: [uuid()] })
    )
    const other = await createEvaluation()
    const otherRun = (await (
      await server.post(`/api/v1/evaluations/${other.id}/gate`, { trace_ids: [same] })
    ).json()) as any
    await expectNotFound(
      await server.post(`/api/v1/evaluations/${e.id}/gate`, {
        trace_ids: [same],
        baseline_run_ids: [otherRun.runs[0].id]
      })
    )
    const down = await recordTrace("down")
    const failed = (await (await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [down] })).json()) as any
    await expectValidation(
      await server.post(`/api/v1/evaluations/${e.id}/gate`, {
        trace_ids: [same],
        baseline_run_ids: [failed.runs[0].id]
      })
    )
  }, 60_000)
})

test("the gate's bound holds for the instance: concurrent gates share TAPEDECK_EVAL_GATE_CONCURRENCY", async () => {
  let inFlight = 0
  let most = 0
  const slow = startFakeOpenAi(async () => {
    most = Math.max(most, ++inFlight)
    await Bun.sleep(100)
    inFlight--
    return { content: JSON.stringify({ score: 1, reason: "ok" }) }
  })
  const one = await startTestServer({ TAPEDECK_LLM_BASE_URL: slow.baseUrl, TAPEDECK_EVAL_GATE_CONCURRENCY: "1" })
  try {
    const e = (await (
      await one.post("/api/v1/evaluations", { name: "one", criteria: [{ name: "c", description: "d" }] })
    ).json()) as any
    const traces = Array.from({ length: 4 }, () => trace({ status: "completed" }))
    for (const t of traces) expect((await one.post("/api/v1/traces", t)).status).toBe(200)
    const gates = await Promise.all(
      [0, 2].map((i) => one.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [traces[i]!.id, traces[i + 1]!.id] }))
    )
    for (const g of gates) expect(((await g.json()) as any).passed).toBe(true)
    expect(slow.requests.length).toBe(4)
    expect(most).toBe(1)
  } finally {
    await one.stop()
    await slow.stop()
  }
}, 60_000)

describe("tapedeck gate (CLI)", () => {
  const cli = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
    const proc = Bun.spawn({
      cmd: [process.execPath, "src/cli.ts", "gate", ...args],
      cwd: `${import.meta.dir}/../..`,
      env: { PATH: process.env.PATH ?? "", TAPEDECK_URL: server.url, TAPEDECK_API_KEY: KEY_A, ...env },
      stdout: "pipe",
      stderr: "pipe"
    })
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited
    ])
    return { stdout, stderr, code }
  }

  test("exit 0 on pass, 1 on fail, 2 on usage or HTTP errors; prints a table", async () => {
    const e = await createEvaluation()
    const a = await recordTrace("q:0.9")
    const b = await recordTrace("q:0.7")
    const pass = await cli(["--evaluation", e.id, "--traces", `${a},${b}`, "--threshold", "0.8"])
    expect(pass.code).toBe(0)
    expect(pass.stdout).toContain(a)
    expect(pass.stdout).toContain("PASSED")
    expect(pass.stdout).toContain("0.8000")

    const fail = await cli(["--evaluation", e.id, "--traces", `${a},${b}`, "--threshold", "0.85"])
    expect(fail.code).toBe(1)
    expect(fail.stdout).toContain("FAILED")

    const down = await recordTrace("down")
    const failedRun = await cli(["--evaluation", e.id, "--traces", `${a},${down}`, "--threshold", "0"])
    expect(failedRun.code).toBe(1)
    expect(failedRun.stdout).toContain(
      "FAILED RUNS (1): not scored, each fails the gate; score and regression cover the 1 judged trace"
    )
    expect(failedRun.stdout).toMatch(new RegExp(`${down.toLowerCase()} \\(run [0-9a-f-]{36}\\): .*HTTP 500`))
    expect(failedRun.stdout).toContain("FAILED: 1 of 2 traces could not be judged")

    const flags = await cli(["--evaluation", e.id, "--traces", a, "--url", server.url, "--key", KEY_A], {
      TAPEDECK_URL: "http://127.0.0.1:1",
      TAPEDECK_API_KEY: ""
    })
    expect(flags.code).toBe(0)

    expect((await cli(["--traces", a])).code).toBe(2)
    expect((await cli(["--evaluation", e.id])).code).toBe(2)
    expect((await cli(["--evaluation", e.id, "--traces", a, "--threshold", "high"])).code).toBe(2)
    const missing = await cli(["--evaluation", uuid(), "--traces", a])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("404")
    expect((await cli(["--evaluation", e.id, "--traces", a], { TAPEDECK_API_KEY: "svc_wrong" })).code).toBe(2)
    expect((await cli(["--evaluation", e.id, "--traces", a], { TAPEDECK_URL: "http://127.0.0.1:1" })).code).toBe(2)
  }, 60_000)
})
