import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace } from "../support/Fixtures.ts"

let server: TestServer
beforeAll(async () => { server = await startTestServer() })
afterAll(() => server.stop())

test("smoke", async () => {
  const sys = { role: "system", content: "S".repeat(2000) }
  const msgs = [sys, { role: "user", content: "hi é \u2028 \" x".repeat(40) }, { role: "assistant", content: "short" }]
  const s1 = span({ input: { messages: msgs, tools: [{ name: "a", schema: "x".repeat(300) }] }, output: "o".repeat(2000) })
  const t = trace({ spans: [s1] })
  const r = await server.post("/api/v1/traces", t)
  expect(r.status).toBe(200)
  const d = (await (await server.get(`/api/v1/traces/${t.id}`)).json()) as any
  expect(JSON.stringify(d.spans[0].input)).toBe(JSON.stringify(s1.input))
  expect(JSON.stringify(d.spans[0].output)).toBe(JSON.stringify(s1.output))
  const rows = await server.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql`SELECT input_skel, input_refs, output_skel, output_refs, input FROM spans`
  }))
  console.log(rows)
})
