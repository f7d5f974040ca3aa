import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { Effect } from "effect"
import { spanProcessor } from "tapedeck"
import { startServer, type TestServer } from "tapedeck/testing"
import { PiiRedactorLive } from "./Redactor.ts"

const alnum = (min: number, max: number) =>
  fc
    .array(fc.constantFrom(..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"), {
      minLength: min,
      maxLength: max
    })
    .map((cs) => cs.join(""))
const lower = (min: number, max: number) =>
  fc
    .array(fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789"), { minLength: min, maxLength: max })
    .map((cs) => cs.join(""))

const email = fc
  .tuple(lower(1, 10), lower(1, 8), fc.constantFrom("com", "org", "io", "co.uk"))
  .map(([user, host, tld]) => `x${user}@${host}.${tld}`)
const card = fc
  .tuple(fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 16, maxLength: 16 }), fc.constantFrom("", " ", "-"))
  .map(([digits, sep]) => [0, 4, 8, 12].map((i) => digits.slice(i, i + 4).join("")).join(sep))
const apiKey = fc.oneof(
  alnum(20, 40).map((s) => `sk-${s}`),
  fc
    .array(fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"), { minLength: 16, maxLength: 16 })
    .map((cs) => `AKIA${cs.join("")}`)
)
const secret = fc.oneof(email, card, apiKey)

/** Text a user may write around a secret. */
const around = (s: string) =>
  fc
    .tuple(fc.constantFrom("my card is", "mail me at", "key:", "", "token ="), fc.constantFrom("", " thanks", "."))
    .map(([a, b]) => `${a} ${s}${b ? ` ${b}` : ""}`)

/** A span carrying secrets in its input, output, name and attributes. */
const secretSpan = (secrets: ReadonlyArray<string>, id: string, parent: string | null, at: string) => ({
  id,
  parent_id: parent,
  span_type: "llm_call",
  name: `answer ${secrets[0]}`,
  input: { messages: [{ role: "user", content: `please help, ${secrets[0]}` }] },
  output: `noted ${secrets[1 % secrets.length]}`,
  metadata: { contact: secrets[2 % secrets.length], [`${secrets[0]}`]: "as a key" },
  started_at: at
})

const uuid = () => crypto.randomUUID()
const now = () => new Date().toISOString()

let server: TestServer
beforeAll(async () => {
  server = await startServer({ extensions: [PiiRedactorLive] })
})
afterAll(() => server?.stop())

const readTrace = async (id: string) => {
  const response = await server.request("GET", `/api/v1/traces/${id}`)
  expect(response.status).toBe(200)
  return await response.text()
}

const expectNoSecret = (text: string, secrets: ReadonlyArray<string>) => {
  for (const s of secrets) expect(text).not.toContain(s)
}

/** Every write path, each with the same secrets; the trace ids written. */
const writeEverywhere = async (secrets: ReadonlyArray<string>): Promise<ReadonlyArray<string>> => {
  const texts = secrets
  // REST: create with spans
  const created = uuid()
  const root = uuid()
  let r = await server.request("POST", "/api/v1/traces", {
    body: {
      id: created,
      name: "redaction",
      started_at: now(),
      status: "running",
      spans: [secretSpan(texts, root, null, now())]
    }
  })
  expect(r.status).toBe(200)
  // REST: spans added to it, a child of the first
  r = await server.request("POST", `/api/v1/traces/${created}/spans`, {
    body: { spans: [secretSpan([...texts].reverse(), uuid(), root, now())] }
  })
  expect([200, 201]).toContain(r.status)
  // Batch: a trace created through POST /api/v1/batch
  const batched = uuid()
  r = await server.request("POST", "/api/v1/batch", {
    body: {
      operations: [
        {
          method: "POST",
          path: "/api/v1/traces",
          body: {
            id: batched,
            name: "batched",
            started_at: now(),
            status: "completed",
            spans: [secretSpan(texts, uuid(), null, now())]
          }
        }
      ]
    }
  })
  expect(r.status).toBe(200)
  const batch = (await r.json()) as { results: ReadonlyArray<{ status: number }> }
  expect(batch.results[0]!.status).toBe(200)
  // OTLP/HTTP JSON: attributes, gen_ai input and output
  const otelTrace = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("")
  const nanos = `${Date.now()}000000`
  r = await server.request("POST", "/v1/traces", {
    body: {
      resourceSpans: [
        {
          resource: { attributes: [{ key: "service.name", value: { stringValue: `svc ${texts[0]}` } }] },
          scopeSpans: [
            {
              spans: [
                {
                  traceId: otelTrace,
                  spanId: "00f067aa0ba902b7",
                  name: `chat ${texts[1 % texts.length]}`,
                  kind: 3,
                  startTimeUnixNano: nanos,
                  endTimeUnixNano: nanos,
                  attributes: [
                    { key: "gen_ai.operation.name", value: { stringValue: "chat" } },
                    { key: "gen_ai.prompt", value: { stringValue: `user said ${texts[0]}` } },
                    { key: "gen_ai.completion", value: { stringValue: `reply ${texts[2 % texts.length]}` } },
                    { key: "app.customer", value: { stringValue: texts[1 % texts.length]! } }
                  ]
                }
              ]
            }
          ]
        }
      ]
    }
  })
  expect(r.status).toBe(200)
  const otlp = (await r.json()) as { spans_ingested: number }
  expect(otlp.spans_ingested).toBe(1)
  return [created, batched, otelTrace]
}

describe(`PII redactor composed into a real server (${process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"})`, () => {
  test("no generated secret appears in what is read back, on every write path", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(secret.chain(around), { minLength: 1, maxLength: 3 }),
        fc.array(secret, { minLength: 3, maxLength: 3 }),
        async (phrases, raw) => {
          const secrets = [...raw]
          const texts = phrases.map((p, i) => `${p} ${raw[i % raw.length]}`)
          const ids = await writeEverywhere(texts.length >= 3 ? texts : [...texts, ...raw])
          for (const id of ids) expectNoSecret(await readTrace(id), secrets)
          const list = await server.request("GET", "/api/v1/traces?limit=100")
          expectNoSecret(await list.text(), secrets)
        }
      ),
      { numRuns: 8 }
    )
  })

  test("a secret is not found by search, and the masked span is", async () => {
    const key = `sk-${"a1b2c3d4".repeat(3)}`
    const [created] = await writeEverywhere([`mail x.person@example.com ${key}`, "4111 1111 1111 1111", key])
    // Indexing is a background job: wait until the trace's spans are searchable.
    let body = ""
    for (let i = 0; i < 100; i++) {
      const r = await server.request("POST", "/api/v1/search", { body: { query: "please help", limit: 100 } })
      body = await r.text()
      if (body.includes(created!)) break
      await Bun.sleep(100)
    }
    expect(body).toContain(created!)
    expect(body).toContain("[api-key]")
    expectNoSecret(body, [key, "x.person@example.com", "4111 1111 1111 1111"])
    const bySecret = await server.request("POST", "/api/v1/search", { body: { query: key, limit: 100 } })
    expectNoSecret(await bySecret.text(), [key])
  })
})

describe("a failing span processor refuses the request and stores nothing", () => {
  let failing: TestServer
  beforeAll(async () => {
    failing = await startServer({
      extensions: [
        PiiRedactorLive,
        spanProcessor({
          name: "broken",
          process: (span) =>
            span.name.includes("boom") ? Effect.fail("upstream classifier down") : Effect.succeedSome(span)
        })
      ]
    })
  })
  afterAll(() => failing?.stop())

  test("REST and OTLP: an error body naming the processor, then 404", async () => {
    const id = uuid()
    const r = await failing.request("POST", "/api/v1/traces", {
      body: {
        id,
        name: "t",
        started_at: now(),
        status: "completed",
        spans: [{ id: uuid(), parent_id: null, span_type: "action", name: "boom", started_at: now() }]
      }
    })
    expect(r.status).toBe(503)
    const body = (await r.json()) as { error: string; code: string; retryable: boolean }
    expect(body.code).toBe("unavailable")
    expect(body.retryable).toBe(true)
    expect(body.error).toContain("broken")
    expect(body.error).toContain("upstream classifier down")
    expect((await failing.request("GET", `/api/v1/traces/${id}`)).status).toBe(404)
    const otelTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    const o = await failing.request("POST", "/v1/traces", {
      body: {
        resourceSpans: [
          {
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: otelTrace,
                    spanId: "00f067aa0ba902b7",
                    name: "boom",
                    startTimeUnixNano: `${Date.now()}000000`,
                    endTimeUnixNano: `${Date.now()}000000`
                  }
                ]
              }
            ]
          }
        ]
      }
    })
    expect(o.status).toBe(503)
    expect((await failing.request("GET", `/api/v1/traces/${otelTrace}`)).status).toBe(404)
  })

  test("the processors run in order: the redactor's output is what the next one sees", async () => {
    const id = uuid()
    const r = await failing.request("POST", "/api/v1/traces", {
      body: {
        id,
        name: "t",
        started_at: now(),
        status: "completed",
        spans: [{ id: uuid(), parent_id: null, span_type: "action", name: "ok a@b.io", started_at: now() }]
      }
    })
    expect(r.status).toBe(200)
    expect(await (await failing.request("GET", `/api/v1/traces/${id}`)).text()).toContain("ok [email]")
  })
})
