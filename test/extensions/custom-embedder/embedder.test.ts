import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { embedder } from "tapedeck"
import { startServer, type TestServer } from "tapedeck/testing"
import { DIMENSIONS, EMBEDDER_ID, embedded, WordHashEmbedderLive } from "./WordHashEmbedder.ts"

const backend = process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"
const now = () => new Date().toISOString()

interface Hit {
  readonly id: string
  readonly trace_id: string
  readonly similarity: number
  readonly match: ReadonlyArray<string>
}

const search = async (server: TestServer, query: string) => {
  const r = await server.request("POST", "/api/v1/search", { body: { query, limit: 10 } })
  return { status: r.status, body: (await r.json()) as { spans: ReadonlyArray<Hit> } & Record<string, unknown> }
}

/** Writes a trace of one span per text; the span ids in order. */
const write = async (server: TestServer, texts: ReadonlyArray<string>) => {
  const spans = texts.map((text) => ({
    id: crypto.randomUUID(),
    parent_id: null,
    span_type: "action",
    name: text,
    started_at: now()
  }))
  const r = await server.request("POST", "/api/v1/traces", {
    body: { id: crypto.randomUUID(), started_at: now(), status: "completed", spans }
  })
  expect(r.status).toBe(200)
  return spans.map((s) => s.id)
}

describe(`a custom embedder composed into a real server (${backend})`, () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startServer({ extensions: [WordHashEmbedderLive] })
  })
  afterAll(() => server?.stop())

  test("diagnostics names it; the spans and the queries are embedded by it; a search finds by its meaning", async () => {
    const diagnostics = (await (await server.request("GET", "/api/v1/diagnostics")).json()) as {
      search: Record<string, unknown>
    }
    expect(diagnostics.search).toMatchObject({
      embedder: EMBEDDER_ID,
      embedder_kind: "extension",
      dimensions: DIMENSIONS
    })

    // "quaxle" and "flurb" are one word to this embedder only: no lexical match, no other embedder relates them.
    const [quaxle, weather, invoice] = await write(server, ["quaxle", "weather forecast sunny", "invoice overdue"])
    let hits: ReadonlyArray<Hit> = []
    for (let i = 0; i < 100; i++) {
      const found = await search(server, "flurb")
      expect(found.status).toBe(200)
      hits = found.body.spans
      if (hits.some((h) => h.id === quaxle)) break
      await Bun.sleep(100)
    }
    expect(hits[0]).toMatchObject({ id: quaxle, match: ["vector"] })
    // The span's text is its type and name ("action quaxle"): half its words are the query's. Stored vectors have
    // 2 bytes a component (docs/search.md), so the similarity is that of the embedder to 3 decimals.
    expect(hits[0]!.similarity).toBeCloseTo(Math.SQRT1_2, 3)
    for (const other of hits.filter((h) => h.id === weather || h.id === invoice)) {
      expect(other.similarity).toBeLessThan(0.3)
    }
    expect(embedded.some((t) => t.includes("quaxle"))).toBe(true)
    expect(embedded).toContain("flurb")
  })
})

describe(`a custom embedder that fails or answers wrongly (${backend})`, () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startServer({
      extensions: [
        embedder({
          id: "example:broken:8",
          dimensions: 8,
          embed: (texts) =>
            texts.some((t) => t.includes("explode"))
              ? Effect.fail("the embedding service is down")
              : texts.some((t) => t.includes("crash"))
                ? Effect.die(new Error("bug in the embedder"))
                : texts.some((t) => t.includes("short"))
                  ? Effect.succeed(texts.map(() => [1, 2, 3]))
                  : Effect.succeed(texts.map(() => [1, 0, 0, 0, 0, 0, 0, 0]))
        })
      ]
    })
  })
  afterAll(() => server?.stop())

  test("a search is a retryable 503 naming the embedder, never a 500", async () => {
    for (const query of ["explode", "crash", "short"]) {
      const { status, body } = await search(server, query)
      expect(status).toBe(503)
      expect(body).toMatchObject({ code: "unavailable", retryable: true })
      expect(String(body.error)).toContain("example:broken:8")
    }
    expect((await search(server, "fine")).status).toBe(200)
  })
})
