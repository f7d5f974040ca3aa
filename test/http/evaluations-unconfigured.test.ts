import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { span, trace } from "../support/Fixtures.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"

// No TAPEDECK_LLM_BASE_URL: the judge must refuse to score, never invent one.
let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
}, 120_000)
afterAll(() => server.stop(), 60_000)

const recordTrace = async () => {
  const t = trace({ name: "agent", status: "completed", output: "done", spans: [span()] })
  expect((await server.post("/api/v1/traces", t)).status).toBe(200)
  return t.id as string
}

describe("evaluations without a model provider", () => {
  test("a run fails with a clear error; the gate fails closed; the default judge model is gpt-4o-mini", async () => {
    const created = await server.post("/api/v1/evaluations", {
      name: "q",
      criteria: [{ name: "ok", description: "it is ok" }]
    })
    const e = (await created.json()) as any
    expect(e.judgeModel).toBe("gpt-4o-mini")
    const t = await recordTrace()

    expect((await server.post(`/api/v1/evaluations/${e.id}/run`, { trace_ids: [t] })).status).toBe(200)
    const deadline = Date.now() + 20_000
    let run: any
    for (;;) {
      run = ((await (await server.get(`/api/v1/evaluations/${e.id}`)).json()) as any).runs[0]
      if (run?.status === "failed" || run?.status === "completed" || Date.now() > deadline) break
      await Bun.sleep(50)
    }
    expect(run).toMatchObject({ status: "failed", score: null, inputTokens: 0, outputTokens: 0 })
    expect(run.error).toContain("no LLM provider is configured")

    const gate = (await (
      await server.post(`/api/v1/evaluations/${e.id}/gate`, { trace_ids: [t], threshold: 0 })
    ).json()) as any
    expect(gate).toMatchObject({ passed: false, score: 0, threshold: 0, regression: false })
    expect(gate.reasons).toEqual(["1 of 1 traces could not be judged"])
    expect(gate.runs[0]).toMatchObject({ traceId: t, status: "failed", score: null, reused: false })
    expect(gate.runs[0].error).toContain("no LLM provider is configured")
  }, 60_000)
})
