import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { Effect } from "effect"
import { spanProcessor } from "tapedeck"
import { fakeModel, otlpProtobuf, startServer, type TestServer } from "tapedeck/testing"
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

/** The judge of the evaluations below: it records every prompt it is sent. */
const judge = fakeModel()

/** Everything the live stream sent the acme account, as received. */
const streamed: Array<string> = []
let socket: WebSocket | undefined

let server: TestServer
beforeAll(async () => {
  server = await startServer({ extensions: [PiiRedactorLive, judge.layer] })
  socket = new WebSocket(`${server.url.replace(/^http/, "ws")}/ws/v1/stream`, {
    headers: { "x-service-key": server.keys.acme }
  } as never)
  socket.addEventListener("message", (m) => streamed.push(String(m.data)))
  await new Promise((resolve, reject) => {
    socket!.addEventListener("open", resolve)
    socket!.addEventListener("error", reject)
  })
  socket.send(JSON.stringify({ type: "subscribe", filters: {} }))
  await until(() => streamed.some((m) => m.includes('"subscribed"')))
})
afterAll(async () => {
  socket?.close()
  await server?.stop()
})

const until = async (done: () => boolean | Promise<boolean>, what = "a condition") => {
  for (let i = 0; i < 300; i++) {
    if (await done()) return
    await Bun.sleep(50)
  }
  throw new Error(`timed out waiting for ${what}`)
}

/** Every row of every table of the server's database, as text: what is stored. */
const storedRows = async (): Promise<string> => {
  const tables = await server.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
  )
  const parts: Array<string> = []
  for (const { name } of tables) {
    const rows = await server.query<{ row: string }>(`SELECT t::text AS row FROM "${name}" t`)
    parts.push(...rows.map((r) => r.row))
  }
  return parts.join("\n")
}

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
  // OTLP/HTTP, JSON and protobuf: attributes, gen_ai input and output
  const otlpIds: Array<string> = []
  for (const protobuf of [false, true]) {
    const otelTrace = [...crypto.getRandomValues(new Uint8Array(16))]
      .map((b) => b.toString(16).padStart(2, "0"))
      .join("")
    const nanos = `${Date.now()}000000`
    const body = {
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
    r = protobuf
      ? await server.request("POST", "/v1/traces", {
          body: otlpProtobuf(body),
          headers: { "content-type": "application/x-protobuf" }
        })
      : await server.request("POST", "/v1/traces", { body })
    expect(r.status).toBe(200)
    if (!protobuf) expect(((await r.json()) as { spans_ingested: number }).spans_ingested).toBe(1)
    // The stored trace's UUID, for the evaluation below.
    const read = await server.request("GET", `/api/v1/traces/${otelTrace}`)
    expect(read.status).toBe(200)
    otlpIds.push(((await read.json()) as { id: string }).id)
  }
  return [created, batched, ...otlpIds]
}

describe(`PII redactor composed into a real server (${process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"})`, () => {
  test("no generated secret appears in what is stored, read, searched, streamed or judged, on every write path", async () => {
    const evaluation = (await (
      await server.request("POST", "/api/v1/evaluations", {
        body: { name: "redaction", criteria: [{ name: "helpful", description: "the answer helps" }] }
      })
    ).json()) as { id: string }
    await fc.assert(
      fc.asyncProperty(
        fc.array(secret.chain(around), { minLength: 1, maxLength: 3 }),
        fc.array(secret, { minLength: 3, maxLength: 3 }),
        async (phrases, raw) => {
          const secrets = [...raw]
          const texts = phrases.map((p, i) => `${p} ${raw[i % raw.length]}`)
          const ids = await writeEverywhere(texts.length >= 3 ? texts : [...texts, ...raw])

          // Read: each trace, and the list.
          for (const id of ids) expectNoSecret(await readTrace(id), secrets)
          const list = await server.request("GET", "/api/v1/traces?limit=100")
          expectNoSecret(await list.text(), secrets)

          // Streamed: the events of every trace written have arrived.
          await until(
            () => ids.every((id) => streamed.some((m) => m.includes(id) && m.includes('"span"'))),
            "the stream"
          )
          expectNoSecret(streamed.join("\n"), secrets)

          // Searched: once the spans are indexed, by the text around the secrets and by each secret.
          let found = ""
          await until(async () => {
            found = await (
              await server.request("POST", "/api/v1/search", { body: { query: "please help", limit: 100 } })
            ).text()
            return ids.slice(0, 2).every((id) => found.includes(id))
          }, "the search index")
          expectNoSecret(found, secrets)
          for (const s of secrets) {
            const r = await server.request("POST", "/api/v1/search", { body: { query: s, limit: 100 } })
            expect(r.status).toBe(200)
            expectNoSecret(await r.text(), secrets)
          }

          // Judged: an evaluation of every trace written; the judge saw each of them.
          const asked = judge.requests.length
          const run = await server.request("POST", `/api/v1/evaluations/${evaluation.id}/run`, {
            body: { trace_ids: ids }
          })
          expect(run.status).toBe(200)
          const runIds = ((await run.json()) as { runs: Array<{ id: string }> }).runs.map((r) => r.id)
          expect(runIds).toHaveLength(ids.length)
          await until(async () => {
            const detail = (await (await server.request("GET", `/api/v1/evaluations/${evaluation.id}`)).json()) as {
              runs: Array<{ id: string; status: string }>
            }
            return runIds.every((id) => detail.runs.some((r) => r.id === id && r.status === "completed"))
          }, "the evaluation runs")
          expect(judge.requests.length - asked).toBe(ids.length)
          // The judge was shown the spans, masked.
          expect(judge.prompts().slice(-20).join("\n")).toMatch(/\[(email|card|api-key)\]/)
          expectNoSecret(judge.prompts().join("\n"), secrets)

          // Stored: every row of every table.
          const stored = await storedRows()
          expect(stored).toMatch(/\[(email|card|api-key)\]/)
          expectNoSecret(stored, secrets)
        }
      ),
      { numRuns: 6 }
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
          process: (span) => {
            if (span.name.includes("boom")) return Effect.fail("upstream classifier down")
            // A bug of its own: a text made unstorable (a NUL character) in place, on the span it was given.
            const input = span.input as { messages?: Array<{ content: string }> } | undefined
            if (span.name.includes("corrupt") && input?.messages?.[0]) input.messages[0].content += "\u0000"
            // And a name longer than a span's may be.
            if (span.name.includes("overlong")) return Effect.succeedSome({ ...span, name: span.name.padEnd(600, "x") })
            return Effect.succeedSome(span)
          }
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

  test("REST: a processor's invalid output refuses the request, on create and on append, and is never stored", async () => {
    const corrupt = () => ({
      id: uuid(),
      parent_id: null,
      span_type: "llm_call",
      name: "corrupt",
      input: { messages: [{ role: "user", content: "hello" }] },
      started_at: now()
    })
    const id = uuid()
    const created = await failing.request("POST", "/api/v1/traces", {
      body: { id, name: "t", started_at: now(), status: "completed", spans: [corrupt()] }
    })
    expect(created.status).toBe(503)
    expect(((await created.json()) as { error: string }).error).toContain("invalid span")
    expect((await failing.request("GET", `/api/v1/traces/${id}`)).status).toBe(404)

    const running = uuid()
    const ok = { ...corrupt(), name: "fine" }
    const started = await failing.request("POST", "/api/v1/traces", {
      body: { id: running, name: "t", started_at: now(), spans: [ok] }
    })
    expect(started.status).toBe(200)
    const appended = await failing.request("POST", `/api/v1/traces/${running}/spans`, {
      body: { spans: [corrupt()] }
    })
    expect(appended.status).toBe(503)
    const detail = (await (await failing.request("GET", `/api/v1/traces/${running}`)).json()) as {
      spans: Array<{ id: string }>
    }
    expect(detail.spans.map((s) => s.id)).toEqual([ok.id])
  })

  test("OTLP: a processor's invalid output refuses the export, and is never stored", async () => {
    const otelTrace = "5bf92f3577b34da6a3ce929d0e0e4737"
    const o = await failing.request("POST", "/v1/traces", {
      body: {
        resourceSpans: [
          {
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: otelTrace,
                    spanId: "00f067aa0ba902b8",
                    name: "overlong",
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
    expect(((await o.json()) as { error: string }).error).toContain("invalid span")
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
