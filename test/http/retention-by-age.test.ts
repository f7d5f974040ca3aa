import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { purgeExpiredTraces } from "#layers/traces/Retention"
import { RetentionRepo } from "#layers/traces/RetentionRepo"
import { UsageCounters } from "#layers/usage/UsageCounters"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"

// Retention by age: per account and per project through the API, purged in batches, reported in usage.
let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_RETENTION_INTERVAL_SECONDS: "3600", TAPEDECK_RETENTION_BATCH_TRACES: "2" })
})
afterAll(() => server.stop())

const put = async (path: string, body: unknown, key = KEY_A) => {
  const res = await server.request("PUT", path, { key, body })
  return { status: res.status, body: (await res.json()) as any }
}

const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString()

const write = async (days: number, projectId?: string, key = KEY_A) => {
  const t = trace({
    started_at: daysAgo(days),
    ...(projectId ? { project_id: projectId } : {}),
    spans: [
      span({
        started_at: daysAgo(days),
        input: { messages: [{ role: "user", content: `${days} ${"r".repeat(1200)}` }] }
      })
    ]
  })
  expect((await server.post("/api/v1/traces", t, key)).status).toBe(200)
  return t.id
}

const exists = (id: string) =>
  server.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ traces: number; spans: number }>`
      SELECT (SELECT count(*) FROM traces WHERE id = ${id}::uuid)::int AS traces,
             (SELECT count(*) FROM spans WHERE trace_id = ${id}::uuid)::int AS spans`
      return row!.traces + row!.spans
    }).pipe(Effect.orDie)
  )

test("settings: the account's, the default and project overrides; bad values are a 400 with the error body", async () => {
  const initial = (await server.get("/api/v1/retention")).json()
  expect(await initial).toEqual({
    retentionDays: null,
    defaultRetentionDays: null,
    effectiveRetentionDays: null,
    projects: []
  })
  for (const bad of [
    { retention_days: 0 },
    { retention_days: 1.5 },
    { retention_days: "30" },
    { retention_days: 36501 },
    {},
    { retention_days: 5, x: 1 }
  ]) {
    const res = await put("/api/v1/retention", bad)
    expect(res.status).toBe(400)
    expect(res.body).toMatchObject({ code: expect.any(String), retryable: false })
  }
  expect((await put("/api/v1/retention/projects/not-a-uuid", { retention_days: 3 })).status).toBe(400)
})

test("expired traces go, with their spans, in batches; nothing within retention is touched; other accounts untouched", async () => {
  const project = uuid()
  expect((await put("/api/v1/retention", { retention_days: 30 })).body.effectiveRetentionDays).toBe(30)
  const set = await put(`/api/v1/retention/projects/${project}`, { retention_days: 400 })
  expect(set.body.projects).toEqual([{ projectId: project, retentionDays: 400 }])
  const expired = [await write(40), await write(31), await write(500, project), await write(45)]
  const kept = [await write(29), await write(1), await write(40, project), await write(399, project)]
  const otherAccount = await write(800, undefined, KEY_B) // no setting, no default: kept until deleted
  const purged = await server.run(
    purgeExpiredTraces.pipe(Effect.provide([RetentionRepo.Default, UsageCounters.Default]))
  )
  expect(purged).toEqual({ traces: 4, spans: 4 })
  for (const id of expired) expect(await exists(id)).toBe(0)
  for (const id of [...kept, otherAccount]) expect(await exists(id)).toBe(2)
  const usage = (await (await server.get("/api/v1/usage")).json()) as any
  expect(usage.retention).toEqual({ retentionDays: 30, tracesPurged: 4, spansPurged: 4 })
  // Removing the project's override puts its traces under the account's 30 days.
  expect((await put(`/api/v1/retention/projects/${project}`, { retention_days: null })).body.projects).toEqual([])
  const again = await server.run(
    purgeExpiredTraces.pipe(Effect.provide([RetentionRepo.Default, UsageCounters.Default]))
  )
  expect(again).toEqual({ traces: 2, spans: 2 })
  expect(await exists(kept[0]!)).toBe(2)
})
