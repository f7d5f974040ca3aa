import { afterAll, beforeAll, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { spanArbitrary, startServer, type TestServer } from "tapedeck/testing"

let server: TestServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.stop())

test("spans generated from the Span schema are taken by the server as a trace's root, and read back by id", async () => {
  let stored = 0
  await fc.assert(
    fc.asyncProperty(spanArbitrary, async (generated) => {
      const span = { ...generated, parent_id: null }
      const id = crypto.randomUUID()
      const r = await server.request("POST", "/api/v1/traces", {
        body: { id, name: "kit", started_at: span.started_at, status: "completed", spans: [span] }
      })
      // What the schema allows the API takes; a value the database cannot hold is a 400 with the error body.
      expect([200, 400]).toContain(r.status)
      if (r.status === 400) {
        expect(await r.json()).toMatchObject({ code: "validation_failed", retryable: false })
        return
      }
      stored++
      const read = (await (await server.request("GET", `/api/v1/traces/${id}`)).json()) as {
        spans: Array<{ id: string }>
      }
      expect(read.spans.map((s) => s.id)).toEqual([span.id])
    }),
    { numRuns: 25 }
  )
  expect(stored).toBeGreaterThan(12)
})
