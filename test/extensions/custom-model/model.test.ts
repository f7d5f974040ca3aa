import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startServer, type TestServer } from "tapedeck/testing"
import { received, RuleModelLive } from "./RuleModel.ts"

const backend = process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"
const uuid = () => crypto.randomUUID()

let server: TestServer
beforeAll(async () => {
  // No TAPEDECK_LLM_BASE_URL: without the extension the judge and replay have no model at all.
  server = await startServer({ extensions: [RuleModelLive] })
})
afterAll(() => server?.stop())

const json = async (response: Response) => {
  expect(response.status).toBe(200)
  return (await response.json()) as any
}

const recordTrace = async (name: string, output: string) => {
  const id = uuid()
  const root = uuid()
  await json(
    await server.request("POST", "/api/v1/traces", {
      body: {
        id,
        name,
        started_at: "2026-01-01T00:00:00.000Z",
        status: "completed",
        input: "Book a flight to Lisbon",
        output,
        spans: [
          { id: root, parent_id: null, span_type: "action", name: "agent", started_at: "2026-01-01T00:00:00.000Z" },
          {
            id: uuid(),
            parent_id: root,
            span_type: "llm_call",
            name: "plan",
            model: "gpt-4o-mini",
            input: [
              { role: "system", content: "You book travel." },
              { role: "user", content: "Book Lisbon" }
            ],
            output: "search flights",
            started_at: "2026-01-01T00:00:01.000Z"
          }
        ]
      }
    })
  )
  return id
}

const settledRuns = async (evaluationId: string, count: number) => {
  for (let i = 0; i < 400; i++) {
    const detail = await json(await server.request("GET", `/api/v1/evaluations/${evaluationId}`))
    const runs = detail.runs as Array<any>
    if (runs.length >= count && runs.every((r) => r.status === "completed" || r.status === "failed")) return runs
    await Bun.sleep(50)
  }
  throw new Error("runs did not finish")
}

describe(`a custom model client composed into a real server (${backend})`, () => {
  test("an evaluation's judge asks it, and its answers are the scores", async () => {
    const good = await recordTrace("good", "Booked TP123")
    const bad = await recordTrace("bad", "Sorry, nothing found")
    const evaluation = await json(
      await server.request("POST", "/api/v1/evaluations", {
        body: { name: "booked", criteria: [{ name: "booked", description: "the flight was booked" }] }
      })
    )
    const before = received.length
    await json(
      await server.request("POST", `/api/v1/evaluations/${evaluation.id}/run`, { body: { trace_ids: [good, bad] } })
    )
    const runs = await settledRuns(evaluation.id, 2)
    const byTrace = Object.fromEntries(runs.map((r) => [r.traceId, r]))
    expect(byTrace[good]).toMatchObject({ status: "completed", score: 1 })
    expect(byTrace[bad]).toMatchObject({ status: "completed", score: 0 })
    const asked = received.slice(before)
    expect(asked).toHaveLength(2)
    expect(asked.every((r) => r.model === evaluation.judgeModel)).toBe(true)
  })

  test("its failures fail the run with its reason, a defect included, and the server goes on", async () => {
    const quota = await recordTrace("quota", "Booked")
    const bug = await recordTrace("bug", "Booked")
    const evaluation = await json(
      await server.request("POST", "/api/v1/evaluations", {
        body: { name: "fails", criteria: [{ name: "booked", description: "the flight was booked" }] }
      })
    )
    await json(
      await server.request("POST", `/api/v1/evaluations/${evaluation.id}/run`, { body: { trace_ids: [quota, bug] } })
    )
    const runs = Object.fromEntries((await settledRuns(evaluation.id, 2)).map((r) => [r.traceId, r]))
    expect(runs[quota]).toMatchObject({ status: "failed" })
    expect(runs[quota].error).toContain("monthly quota used up")
    expect(runs[bug]).toMatchObject({ status: "failed" })
    expect(runs[bug].error).toContain('model client "rule-model" failed: rule table is corrupt')
  })

  test("a fork's server replay re-executes model calls through it", async () => {
    const traceId = await recordTrace("travel", "Booked TP123")
    const recorded = await json(await server.request("GET", `/api/v1/traces/${traceId}`))
    const plan = recorded.spans.find((s: any) => s.name === "plan")
    const fork = await json(
      await server.request("POST", "/api/v1/forks", {
        body: { trace_id: traceId, fork_point_span_id: plan.id, modified_input: "Book Porto instead" }
      })
    )
    const before = received.length
    const result = await json(await server.request("POST", `/api/v1/forks/${fork.id}/replay`, { body: {} }))
    expect(result).toMatchObject({ status: "completed", mode: "server" })
    expect(received.slice(before).map((r) => r.messages)).toEqual([
      [
        { role: "system", content: "You book travel." },
        { role: "user", content: "Book Porto instead" }
      ]
    ])
    const stored = await json(await server.request("GET", `/api/v1/traces/${result.result_trace_id}`))
    const replayed = stored.spans.find((s: any) => s.name === "plan")
    expect(replayed.output).toMatchObject({ role: "assistant", content: "plan for: Book Porto instead" })
  })
})
