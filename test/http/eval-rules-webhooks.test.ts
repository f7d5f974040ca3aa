import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { startFakeOpenAi, type FakeOpenAi } from "../support/FakeOpenAi.ts"
import { trace, uuid } from "../support/Fixtures.ts"
import { KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { sqlOn, until } from "../support/Until.ts"
import {
  type Receiver,
  selfSigned,
  type SelfSigned,
  startReceiver,
  verifySignature
} from "../support/WebhookReceiver.ts"

// Deliveries to a loopback https receiver need the test-only switch; every other blocked range stays blocked.
let server: TestServer
let judge: FakeOpenAi
let tls: SelfSigned
let receiver: Receiver
const script = new Map<string, (index: number) => Response | undefined>()

beforeAll(async () => {
  tls = selfSigned(["localhost", "IP:127.0.0.1"])
  receiver = startReceiver(tls, (request) => {
    const forPath = receiver.received.filter((r) => r.path === request.path).length - 1
    return script.get(request.path)?.(forPath)
  })
  judge = startFakeOpenAi(() => ({ content: JSON.stringify({ score: 0.8, reason: "fine" }) }))
  server = await startTestServer({
    TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000",
    TAPEDECK_LLM_BASE_URL: judge.baseUrl,
    TAPEDECK_WEBHOOK_ALLOW_LOOPBACK_FOR_TESTS: "true",
    TAPEDECK_WEBHOOK_CA_FILE: tls.certFile,
    TAPEDECK_WEBHOOK_BACKOFF_MS: "200",
    TAPEDECK_WEBHOOK_MAX_ATTEMPTS: "3"
  })
}, 120_000)
afterAll(async () => {
  await server.stop()
  await judge.stop()
  receiver.stop()
  tls.cleanup()
}, 60_000)

const setup = async (path: string, answer: (index: number) => Response | undefined) => {
  script.set(path, answer)
  const evaluation = (await (
    await server.post("/api/v1/evaluations", {
      name: "helpfulness",
      criteria: [{ name: "helpful", description: "the answer helps" }]
    })
  ).json()) as any
  const project = uuid()
  const response = await server.post("/api/v1/eval-rules", {
    evaluation_id: evaluation.id,
    filter: { project_id: project },
    webhook_url: receiver.url(path)
  })
  expect(response.status).toBe(200)
  const rule = (await response.json()) as any
  const t = trace({ project_id: project, status: "completed", input: { q: "hi" }, output: { a: "hello" } })
  expect((await server.post("/api/v1/traces", t)).status).toBe(200)
  return { evaluationId: evaluation.id as string, rule, traceId: t.id as string }
}

/** The delivery log, oldest attempt first, once `done` holds. */
const log = (ruleId: string, done: (items: Array<any>) => boolean) =>
  until(async () => {
    const body = (await (await server.get(`/api/v1/eval-rules/${ruleId}/deliveries`)).json()) as any
    const items = [...body.items].reverse()
    return done(items) ? items : undefined
  }, "the delivery log")

describe("webhook delivery", () => {
  test("waits for the run, signs verifiably, retries with exponential backoff and logs every attempt", async () => {
    const { evaluationId, rule, traceId } = await setup("/flaky", (i) =>
      i < 2 ? new Response("no", { status: i === 0 ? 503 : 500 }) : undefined
    )
    const items = await log(rule.id, (items) => items.some((i) => i.outcome === "succeeded"))
    expect(items.map((i) => [i.attempt, i.outcome, i.statusCode])).toEqual([
      [1, "failed", 503],
      [2, "failed", 500],
      [3, "succeeded", 200]
    ])
    expect(items[0].error).toBe("the endpoint answered 503")
    expect(items[0].nextAttemptAt).not.toBeNull()
    expect(items[2].nextAttemptAt).toBeNull()
    expect(new Set(items.map((i) => i.deliveryId)).size).toBe(1)
    for (const item of items) expect(item.durationMs).toBeGreaterThanOrEqual(0)

    const requests = receiver.received.filter((r) => r.path === "/flaky")
    expect(requests.length).toBe(3)
    // Backoff: 200 ms after the first failure, 800 ms after the second.
    expect(requests[1]!.at - requests[0]!.at).toBeGreaterThanOrEqual(190)
    expect(requests[2]!.at - requests[1]!.at).toBeGreaterThanOrEqual(790)
    for (const request of requests) {
      expect(request.headers["content-type"]).toBe("application/json")
      expect(request.headers["tapedeck-event"]).toBe("evaluation.completed")
      expect(request.headers["tapedeck-delivery"]).toBe(items[0].deliveryId)
      expect(await verifySignature(rule.webhookSecret, request.headers["tapedeck-signature"]!, request.body)).toBe(true)
      expect(
        await verifySignature(
          rule.webhookSecret,
          request.headers["tapedeck-signature"]!,
          request.body.replace("0.8", "0.9")
        )
      ).toBe(false)
      const payload = JSON.parse(request.body)
      expect(payload).toEqual({
        event: "evaluation.completed",
        delivery_id: items[0].deliveryId,
        rule_id: rule.id,
        evaluation_id: evaluationId,
        trace_id: traceId,
        runs: [{ id: expect.any(String), status: "completed", score: 0.8 }],
        delivered_at: expect.any(String)
      })
    }
    // The run in the payload is the evaluation's run of this trace.
    const detail = (await (await server.get(`/api/v1/evaluations/${evaluationId}`)).json()) as any
    expect(detail.runs.map((r: any) => r.id)).toContain(JSON.parse(requests[0]!.body).runs[0].id)
  }, 60_000)

  test("a delivery job that runs again (its worker died before recording the job done) repeats no attempt and forks no retry chain", async () => {
    const { rule } = await setup("/replayed", (i) => (i === 0 ? new Response("no", { status: 500 }) : undefined))
    const first = await log(rule.id, (items) => items.some((i) => i.outcome === "succeeded"))
    expect(first.map((i) => [i.attempt, i.outcome])).toEqual([
      [1, "failed"],
      [2, "succeeded"]
    ])
    const deliveryId = first[0].deliveryId as string
    const sql = sqlOn(server)
    const jobsOf = () =>
      sql<{ id: string; status: string }>(
        `SELECT id, status FROM jobs WHERE kind = 'webhook.deliver' AND payload->>'deliveryId' = $1`,
        deliveryId
      )
    const jobs = await jobsOf()
    // Every job of the delivery (the waits for the run and both attempts) is claimed and run once more.
    await sql(
      `UPDATE jobs SET status = 'queued', run_at = now(), locked_until = NULL
       WHERE kind = 'webhook.deliver' AND payload->>'deliveryId' = $1`,
      deliveryId
    )
    await until(
      async () => ((await jobsOf()).every((j) => j.status === "completed") ? true : undefined),
      "the replayed jobs"
    )
    await Bun.sleep(500)
    expect((await jobsOf()).map((j) => j.id).sort()).toEqual(jobs.map((j) => j.id).sort())
    expect(receiver.received.filter((r) => r.path === "/replayed").length).toBe(2)
    const after = (await (await server.get(`/api/v1/eval-rules/${rule.id}/deliveries`)).json()) as any
    expect(after.total).toBe(2)
  }, 60_000)

  test("gives up after TAPEDECK_WEBHOOK_MAX_ATTEMPTS", async () => {
    const { rule } = await setup("/down", () => new Response("down", { status: 500 }))
    const items = await log(rule.id, (items) => items.length >= 3 && items[2].nextAttemptAt === null)
    expect(items.map((i) => i.outcome)).toEqual(["failed", "failed", "failed"])
    expect(items[2].error).toBe("the endpoint answered 500; giving up after 3 attempts")
    await Bun.sleep(1500)
    expect(receiver.received.filter((r) => r.path === "/down").length).toBe(3)
  }, 60_000)

  test("a redirect to a private address is refused (and not retried), even with the loopback switch on", async () => {
    const { rule } = await setup(
      "/redirect",
      () => new Response(null, { status: 307, headers: { location: "https://10.0.0.1/steal" } })
    )
    const items = await log(rule.id, (items) => items.length > 0)
    await Bun.sleep(1000)
    const after = (await (await server.get(`/api/v1/eval-rules/${rule.id}/deliveries`)).json()) as any
    expect(after.total).toBe(1)
    expect(items[0]).toMatchObject({ attempt: 1, outcome: "blocked", statusCode: null })
    expect(items[0].error).toContain("10.0.0.1 is a private address")
    expect((await server.get(`/api/v1/eval-rules/${rule.id}/deliveries`, KEY_B)).status).toBe(404)
  }, 60_000)

  test("deleting the rule stops its pending retries", async () => {
    const { rule } = await setup("/gone", () => new Response("no", { status: 500 }))
    await log(rule.id, (items) => items.length >= 1)
    expect((await server.request("DELETE", `/api/v1/eval-rules/${rule.id}`)).status).toBe(200)
    const atDelete = receiver.received.filter((r) => r.path === "/gone").length
    // Without the delete the attempts would go on (200 ms, then 800 ms apart); one may have been in flight.
    await Bun.sleep(2500)
    const final = receiver.received.filter((r) => r.path === "/gone").length
    expect(final).toBeLessThanOrEqual(atDelete + 1)
    if (final < 3) {
      // The pending retry found the rule deleted and stopped, saying so in the log.
      const rows = await server.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ outcome: string; error: string }>`
          SELECT outcome, error FROM webhook_deliveries WHERE rule_id = ${rule.id} ORDER BY created_at DESC LIMIT 1`
        }).pipe(Effect.orDie)
      )
      expect(rows[0]).toEqual({ outcome: "gave_up", error: "the eval rule was deleted" })
    }
    expect((await server.get(`/api/v1/eval-rules/${rule.id}/deliveries`)).status).toBe(404)
  }, 60_000)
})
