import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createTestDatabase, type TestDatabase } from "../support/Database.ts"
import { span, trace } from "../support/Fixtures.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"

/** A fake OpenAI-compatible /embeddings: 4-d vectors from word counts, slow enough to watch re-embedding progress. */
const inputs: Array<string> = []
let delayMs = 0
let failing = false
const TOPICS = ["timeout", "payment", "flight", "hotel"]
const fakeVector = (text: string) => {
  const lower = text.toLowerCase()
  return TOPICS.map((t) => lower.split(t).length - 1 + 0.01)
}
let fake: ReturnType<typeof Bun.serve>
let database: TestDatabase | undefined
let dataDir: string | undefined
let shared: Record<string, string>

beforeAll(async () => {
  fake = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const body = (await request.json()) as { input: Array<string> }
      if (failing) return new Response("down", { status: 503 })
      inputs.push(...body.input)
      if (delayMs > 0) await Bun.sleep(delayMs)
      return Response.json({ data: body.input.map((t, index) => ({ index, embedding: fakeVector(t) })) })
    }
  })
  // One database that outlives a server: the second server starts over the first one's data.
  if (process.env.TEST_DATABASE_URL) {
    database = await createTestDatabase()
    shared = database.env
  } else {
    dataDir = mkdtempSync(join(tmpdir(), "tapedeck-search-"))
    shared = { TAPEDECK_DATA_DIR: dataDir }
  }
})
afterAll(async () => {
  fake.stop(true)
  await database?.drop()
  if (dataDir) rmSync(dataDir, { recursive: true, force: true })
})

const diagnostics = async (server: TestServer) =>
  ((await (await server.get("/api/v1/diagnostics")).json()) as any).search
const settle = async (server: TestServer, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const d = await diagnostics(server)
    if (d.pending_jobs === 0 && d.stale_spans === 0) return d
    if (Date.now() > deadline) throw new Error(`not settled: ${JSON.stringify(d)}`)
    await Bun.sleep(100)
  }
}
const searchIds = async (server: TestServer, query: string, limit = 100) =>
  ((await (await server.post("/api/v1/search", { query, limit })).json()) as any).spans.map(
    (s: any) => s.id
  ) as Array<string>

describe("changing the embedder", () => {
  test("re-embeds every span in a durable background job; meanwhile search uses only current vectors", async () => {
    const spans = Array.from({ length: 40 }, (_, i) =>
      span({
        name: `step_${i}`,
        output: i % 2 === 0 ? `the flight to Lisbon number ${i}` : `payment number ${i} captured`
      })
    )

    const offline = await startTestServer(shared)
    try {
      expect((await offline.post("/api/v1/traces", trace({ spans }))).status).toBe(200)
      const d = await settle(offline)
      expect(d.embedder).toMatch(/^offline:/)
      expect(d.indexed_spans).toBe(40)
    } finally {
      await offline.stop()
    }

    delayMs = 150
    const remote = await startTestServer({
      ...shared,
      TAPEDECK_EMBEDDINGS_BASE_URL: `http://127.0.0.1:${fake.port}/v1`,
      TAPEDECK_EMBEDDINGS_MODEL: "fake-embed",
      TAPEDECK_EMBEDDINGS_BATCH_SIZE: "4"
    })
    try {
      const first = await diagnostics(remote)
      expect(first.embedder).toBe("openai-compatible:fake-embed")
      expect(first.embedder_kind).toBe("openai-compatible")
      // Before re-embedding finishes, only spans with a vector from the current embedder can be found.
      let sawPartial = false
      for (;;) {
        const found = await searchIds(remote, "flight")
        const d = await diagnostics(remote)
        expect(found.length).toBeLessThanOrEqual(d.indexed_spans)
        if (d.indexed_spans > 0 && d.indexed_spans < 40) sawPartial = true
        if (d.stale_spans === 0 && d.pending_jobs === 0) break
        await Bun.sleep(50)
      }
      expect(sawPartial).toBe(true)
      expect(inputs.length).toBeGreaterThanOrEqual(40)
      expect(inputs.some((t) => t.includes("flight to Lisbon"))).toBe(true)
      const found = await searchIds(remote, "flight", 20)
      const flights = new Set<string>(spans.filter((_, i) => i % 2 === 0).map((s) => s.id))
      expect(found.filter((id) => flights.has(id)).length).toBe(20)
    } finally {
      await remote.stop()
    }
  }, 120_000)

  test("a provider outage fails the indexing job (retried later) and search answers 503, never 500", async () => {
    delayMs = 0
    failing = true
    const remote = await startTestServer({
      ...shared,
      TAPEDECK_EMBEDDINGS_BASE_URL: `http://127.0.0.1:${fake.port}/v1`,
      TAPEDECK_EMBEDDINGS_MODEL: "fake-embed",
      TAPEDECK_EMBEDDINGS_MAX_RETRIES: "0",
      TAPEDECK_JOB_BACKOFF_MS: "100000"
    })
    try {
      const response = await remote.post("/api/v1/search", { query: "flight" })
      expect(response.status).toBe(503)
      expect(((await response.json()) as any).code).toBe("unavailable")
      expect((await remote.post("/api/v1/traces", trace({ spans: [span({ name: "late_hotel" })] }))).status).toBe(200)
      await Bun.sleep(500)
      expect((await diagnostics(remote)).stale_spans).toBe(1)
      failing = false
    } finally {
      failing = false
      await remote.stop()
    }
  }, 60_000)
})
