import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { sqlOn, until } from "../support/Until.ts"
import { trace, uuid } from "../support/Fixtures.ts"

// Webhooks here run with the address block fully on (no test-only switch): loopback is refused.
let server: TestServer
beforeAll(async () => {
  server = await startTestServer({
    TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000",
    TAPEDECK_WEBHOOK_SECRET_KEY: "a-test-key-for-sealing-secrets"
  })
}, 120_000)
afterAll(() => server.stop(), 60_000)

const query = <A extends object>(text: string, ...params: Array<unknown>) => sqlOn(server)<A>(text, ...params)

/** Waits until no job of the account's kinds below is queued or running. */
const drained = () =>
  until(async () => {
    const rows = await query<{ n: number }>(
      `SELECT count(*)::int AS n FROM jobs WHERE status IN ('queued', 'running') AND kind IN ('trace.terminal', 'webhook.deliver')`
    )
    return rows[0]!.n === 0 ? true : undefined
  }, "the job queue to drain").catch(async (e) => {
    console.error(await query(`SELECT kind, status, attempts, error, payload FROM jobs WHERE status <> 'completed'`))
    throw e
  })

const evaluation = async (key = KEY_A, isPublic = false) => {
  const response = await server.post(
    "/api/v1/evaluations",
    { name: "helpfulness", criteria: [{ name: "helpful", description: "the answer helps" }], is_public: isPublic },
    key
  )
  expect(response.status).toBe(200)
  return ((await response.json()) as any).id as string
}

/** Creates a rule; without a filter it gets one no trace of the other tests matches (an empty filter matches all). */
const createRule = async (body: Record<string, unknown>, key = KEY_A) => {
  const response = await server.post("/api/v1/eval-rules", { filter: { project_id: uuid() }, ...body }, key)
  const json = (await response.json()) as any
  if (response.status !== 200) throw new Error(`${response.status} ${JSON.stringify(json)}`)
  return json
}

const runsOf = (traceId: string) =>
  query<{ id: string; evaluation_id: string }>(
    `SELECT id, evaluation_id FROM evaluation_runs WHERE trace_id = $1`,
    traceId
  )

describe("POST /api/v1/eval-rules", () => {
  test("creates with defaults; the webhook secret is returned once and stored sealed", async () => {
    const evaluationId = await evaluation()
    const rule = await createRule({ evaluation_id: evaluationId, webhook_url: "https://hooks.example.com/tapedeck" })
    expect(rule).toMatchObject({
      evaluationId,
      name: null,
      filter: { project_id: expect.any(String) },
      samplingRate: 1,
      webhookUrl: "https://hooks.example.com/tapedeck",
      enabled: true
    })
    expect(rule.webhookSecret).toMatch(/^whsec_[0-9a-f]{64}$/)
    const got = (await (await server.get(`/api/v1/eval-rules/${rule.id}`)).json()) as any
    expect(got.webhookSecret).toBeUndefined()
    expect(got).toEqual({ ...rule, webhookSecret: undefined })
    const listed = (await (await server.get("/api/v1/eval-rules?limit=100")).json()) as any
    expect(listed.items.find((r: any) => r.id === rule.id).webhookSecret).toBeUndefined()
    const stored = await query<{ webhook_secret: string }>(
      `SELECT webhook_secret FROM eval_rules WHERE id = $1`,
      rule.id
    )
    expect(stored[0]!.webhook_secret.startsWith("aesgcm:")).toBe(true)
    expect(stored[0]!.webhook_secret).not.toContain(rule.webhookSecret.slice(6))
    const plain = await createRule({ evaluation_id: evaluationId })
    expect(plain.webhookSecret).toBeUndefined()
    expect(plain.webhookUrl).toBeNull()
  }, 60_000)

  test("https only, and addresses deliveries would refuse are a 400", async () => {
    const evaluationId = await evaluation()
    for (const url of [
      "http://hooks.example.com/x",
      "ftp://hooks.example.com/x",
      "https://user:secret@hooks.example.com/x",
      "not a url",
      "https://127.0.0.1/x",
      "https://2130706433/x",
      "https://0x7f.1/x",
      "https://[::1]/x",
      "https://[::ffff:7f00:1]/x",
      "https://10.0.0.1/x",
      "https://169.254.169.254/latest/meta-data",
      "https://[fd00:ec2::254]/",
      "https://metadata.google.internal/computeMetadata/v1/"
    ]) {
      const response = await server.post("/api/v1/eval-rules", { evaluation_id: evaluationId, webhook_url: url })
      expect(response.status).toBe(400)
      const body = (await response.json()) as any
      expect(body).toMatchObject({ code: "validation_failed", retryable: false })
      expect(body.error).toContain("webhook_url")
    }
  }, 60_000)

  test("strict body and limits", async () => {
    const evaluation_id = await evaluation()
    for (const bad of [
      {},
      { evaluation_id: "nope" },
      { evaluation_id, extra: 1 },
      { evaluation_id, sampling_rate: 2 },
      { evaluation_id, sampling_rate: "1" },
      { evaluation_id, filter: { status: "running" } },
      { evaluation_id, filter: { colour: "red" } },
      { evaluation_id, filter: { project_id: "x" } },
      { evaluation_id, filter: { min_cost: -1 } },
      { evaluation_id, name: "n".repeat(501) },
      { evaluation_id, enabled: "yes" }
    ]) {
      const response = await server.post("/api/v1/eval-rules", bad)
      expect(response.status).toBe(400)
      expect(((await response.json()) as any).code).toBe("validation_failed")
    }
    expect((await server.request("POST", "/api/v1/eval-rules", { body: "{not json" })).status).toBe(400)
  }, 60_000)

  test("the evaluation must be visible: missing, deleted or another account's private one is a 404; a public one is fine", async () => {
    expect((await server.post("/api/v1/eval-rules", { evaluation_id: uuid() })).status).toBe(404)
    const foreign = await evaluation(KEY_B)
    const response = await server.post("/api/v1/eval-rules", { evaluation_id: foreign })
    expect(response.status).toBe(404)
    expect(await response.json()).toEqual({
      error: `evaluation ${foreign} not found`,
      code: "not_found",
      retryable: false
    })
    const shared = await evaluation(KEY_B, true)
    expect(
      (await server.post("/api/v1/eval-rules", { evaluation_id: shared, filter: { project_id: uuid() } })).status
    ).toBe(200)
    const deleted = await evaluation()
    expect((await server.request("DELETE", `/api/v1/evaluations/${deleted}`)).status).toBe(200)
    expect((await server.post("/api/v1/eval-rules", { evaluation_id: deleted })).status).toBe(404)
  }, 60_000)
})

describe("reading and deleting rules", () => {
  test("list is paginated, newest first; cross-account reads, deletes and delivery logs are 404", async () => {
    const evaluationId = await evaluation()
    const a = await createRule({ evaluation_id: evaluationId, name: "first" })
    const b = await createRule({ evaluation_id: evaluationId, name: "second" })
    const page = (await (await server.get("/api/v1/eval-rules?limit=1")).json()) as any
    expect(page).toMatchObject({ limit: 1, offset: 0 })
    expect(page.items.map((r: any) => r.id)).toEqual([b.id])
    expect(page.total).toBeGreaterThanOrEqual(2)
    const next = (await (await server.get("/api/v1/eval-rules?limit=1&offset=1")).json()) as any
    expect(next.items.map((r: any) => r.id)).toEqual([a.id])
    for (const bad of ["?limit=0", "?limit=101", "?offset=-1", "?limit=x", "?colour=1"]) {
      expect((await server.get(`/api/v1/eval-rules${bad}`)).status).toBe(400)
    }
    expect((await server.get(`/api/v1/eval-rules/${a.id}`, KEY_B)).status).toBe(404)
    expect((await server.get(`/api/v1/eval-rules/${a.id}/deliveries`, KEY_B)).status).toBe(404)
    expect((await server.request("DELETE", `/api/v1/eval-rules/${a.id}`, { key: KEY_B })).status).toBe(404)
    const other = (await (await server.get("/api/v1/eval-rules?limit=100", KEY_B)).json()) as any
    expect(other.items.map((r: any) => r.id)).not.toContain(a.id)
    expect((await server.get("/api/v1/eval-rules/nope")).status).toBe(400)
    expect((await server.get(`/api/v1/eval-rules/${uuid()}`)).status).toBe(404)

    const deleted = await server.request("DELETE", `/api/v1/eval-rules/${a.id}`)
    expect(deleted.status).toBe(200)
    expect(await deleted.json()).toEqual({ deleted: true })
    expect((await server.get(`/api/v1/eval-rules/${a.id}`)).status).toBe(404)
    expect((await server.request("DELETE", `/api/v1/eval-rules/${a.id}`)).status).toBe(404)
    const after = (await (await server.get("/api/v1/eval-rules?limit=100")).json()) as any
    expect(after.items.map((r: any) => r.id)).not.toContain(a.id)
  }, 60_000)
})

describe("rules on terminal traces", () => {
  test("only matching, sampled traces get a run; a repeated terminal job queues nothing twice", async () => {
    const evaluationId = await evaluation()
    const project = uuid()
    const rule = await createRule({
      evaluation_id: evaluationId,
      filter: {
        project_id: project,
        name_pattern: "checkout-*",
        status: "failed",
        metadata: { env: "prod" },
        min_cost: 0.5
      }
    })
    const never = await createRule({ evaluation_id: evaluationId, filter: { project_id: project }, sampling_rate: 0 })
    const disabled = await createRule({ evaluation_id: evaluationId, filter: { project_id: project }, enabled: false })
    const base = {
      project_id: project,
      name: "checkout-eu",
      status: "failed",
      metadata: { env: "prod" },
      total_cost: 0.6
    }
    const matching = trace(base)
    const misses = [
      trace({ ...base, project_id: uuid() }),
      trace({ ...base, name: "search-eu" }),
      trace({ ...base, status: "completed" }),
      trace({ ...base, metadata: { env: "staging" } }),
      trace({ ...base, total_cost: 0.4 }),
      trace({ ...base, status: "running" })
    ]
    for (const t of [matching, ...misses]) expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    await until(async () => ((await runsOf(matching.id)).length > 0 ? true : undefined), "the rule's run")
    await drained()
    const runs = await runsOf(matching.id)
    expect(runs.map((r) => r.evaluation_id)).toEqual([evaluationId])
    for (const t of misses) expect(await runsOf(t.id)).toEqual([])
    const decisions = await query<{ rule_id: string }>(
      `SELECT rule_id FROM eval_rule_matches WHERE trace_id = $1`,
      matching.id
    )
    expect(decisions.map((d) => d.rule_id)).toEqual([rule.id])
    expect(decisions.map((d) => d.rule_id)).not.toContain(never.id)
    expect(decisions.map((d) => d.rule_id)).not.toContain(disabled.id)

    // The job again (a retry after a crash): the decision is found, nothing new is queued.
    const accountId = (
      await query<{ account_id: string }>(`SELECT account_id FROM traces WHERE id = $1`, matching.id)
    )[0]!.account_id
    await query(
      `INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts) VALUES ($1, $2, 'trace.terminal', $3::jsonb, 'queued', 3)`,
      uuid(),
      accountId,
      JSON.stringify({ traceId: matching.id, status: "failed" })
    )
    await Bun.sleep(100)
    await drained()
    expect((await runsOf(matching.id)).length).toBe(1)
  }, 60_000)

  test("a webhook to a name that resolves to loopback is refused at delivery and logged as blocked", async () => {
    const evaluationId = await evaluation()
    const project = uuid()
    const rule = await createRule({
      evaluation_id: evaluationId,
      filter: { project_id: project },
      webhook_url: "https://localhost:9/hook"
    })
    const t = trace({ project_id: project, status: "completed" })
    expect((await server.post("/api/v1/traces", t)).status).toBe(200)
    const log = await until(
      async () => {
        const body = (await (await server.get(`/api/v1/eval-rules/${rule.id}/deliveries`)).json()) as any
        return body.items.length > 0 ? body : undefined
      },
      "a delivery attempt",
      30_000
    )
    expect(log.total).toBe(1)
    expect(log.items[0]).toMatchObject({
      ruleId: rule.id,
      traceId: t.id,
      attempt: 1,
      outcome: "blocked",
      statusCode: null,
      nextAttemptAt: null
    })
    expect(log.items[0].error).toMatch(/localhost resolves to (127\.0\.0\.1|::1)/)
    // Another account sees neither the rule nor its log.
    expect((await server.get(`/api/v1/eval-rules/${rule.id}/deliveries`, KEY_B)).status).toBe(404)
  }, 60_000)
})
