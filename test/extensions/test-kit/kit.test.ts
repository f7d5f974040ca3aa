import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import {
  checkArbitrary,
  fakeModel,
  judgeAnswer,
  judgeRequestOf,
  otlpExportArbitrary,
  otlpProtobuf,
  spanArbitrary,
  startServer,
  type TestServer,
  traceArbitrary
} from "tapedeck/testing"

const backend = process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"

let server: TestServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.stop())

describe(`the kit's arbitraries are taken by the server (${backend})`, () => {
  test("spans generated from the Span schema are taken as a trace's root, and read back by id", async () => {
    await fc.assert(
      fc.asyncProperty(spanArbitrary, async (generated) => {
        const span = { ...generated, id: crypto.randomUUID(), parent_id: null }
        const id = crypto.randomUUID()
        const r = await server.request("POST", "/api/v1/traces", {
          body: { id, name: "kit", started_at: span.started_at, status: "completed", spans: [span] }
        })
        expect(r.status).toBe(200)
        const read = (await (await server.request("GET", `/api/v1/traces/${id}`)).json()) as {
          spans: Array<{ id: string }>
        }
        expect(read.spans.map((s) => s.id)).toEqual([span.id])
      }),
      { numRuns: 25 }
    )
  })

  test("traces (create-trace bodies) are created with every span", async () => {
    await fc.assert(
      fc.asyncProperty(traceArbitrary, async (trace) => {
        const r = await server.request("POST", "/api/v1/traces", { body: trace })
        expect(r.status).toBe(200)
        const read = (await (await server.request("GET", `/api/v1/traces/${trace.id}`)).json()) as {
          spans: Array<{ id: string }>
        }
        expect(read.spans.map((s) => s.id).sort()).toEqual(trace.spans.map((s) => s.id).sort())
      }),
      { numRuns: 25 }
    )
  })

  test("enforcement checks are answered with a decision", async () => {
    await fc.assert(
      fc.asyncProperty(checkArbitrary, async (check) => {
        const r = await server.request("POST", "/api/v1/enforcement/check", { body: check })
        expect(r.status).toBe(200)
        expect(((await r.json()) as { verdict: string }).verdict).toBe("allow")
      }),
      { numRuns: 25 }
    )
  })

  test("OTLP exports are ingested whole, as JSON and as protobuf", async () => {
    await fc.assert(
      fc.asyncProperty(otlpExportArbitrary, fc.boolean(), async (body, protobuf) => {
        const spans = body.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))
        const r = protobuf
          ? await server.request("POST", "/v1/traces", {
              body: otlpProtobuf(body),
              headers: { "content-type": "application/x-protobuf" }
            })
          : await server.request("POST", "/v1/traces", { body })
        expect(r.status).toBe(200)
        if (!protobuf) expect(((await r.json()) as { spans_ingested: number }).spans_ingested).toBe(spans.length)
        for (const traceId of new Set(spans.map((s) => s.traceId))) {
          const read = await server.request("GET", `/api/v1/traces/${traceId}`)
          expect(read.status).toBe(200)
          const detail = (await read.json()) as { spans: ReadonlyArray<unknown> }
          expect(detail.spans.length).toBe(spans.filter((s) => s.traceId === traceId).length)
        }
      }),
      { numRuns: 25 }
    )
  })
})

describe(`the fake model (${backend})`, () => {
  const model = fakeModel({
    answer: (request) => judgeAnswer(judgeRequestOf(request)?.criterion === "polite" ? 0.5 : 1)
  })
  let judged: TestServer
  beforeAll(async () => {
    judged = await startServer({ extensions: [model.layer] })
  })
  afterAll(() => judged?.stop())

  test("scripted answers are what an evaluation's judge scores", async () => {
    const [trace] = fc.sample(traceArbitrary, 1)
    const body = { ...trace!, name: "kit-judged", status: "completed" }
    expect((await judged.request("POST", "/api/v1/traces", { body })).status).toBe(200)
    const evaluation = (await (
      await judged.request("POST", "/api/v1/evaluations", {
        body: {
          name: "kit",
          criteria: [
            { name: "correct", description: "right answer" },
            { name: "polite", description: "kind words" }
          ]
        }
      })
    ).json()) as { id: string }
    const run = await judged.request("POST", `/api/v1/evaluations/${evaluation.id}/run`, {
      body: { trace_ids: [body.id] }
    })
    expect(run.status).toBe(200)
    let runs: Array<{ status: string; score: number | null }> = []
    for (let i = 0; i < 200 && !(runs[0]?.status === "completed" || runs[0]?.status === "failed"); i++) {
      await Bun.sleep(50)
      runs = (
        (await (await judged.request("GET", `/api/v1/evaluations/${evaluation.id}`)).json()) as { runs: typeof runs }
      ).runs
    }
    expect(runs[0]).toMatchObject({ status: "completed", score: 0.75 })
    expect(model.requests.map((r) => judgeRequestOf(r)?.traceName)).toEqual(["kit-judged", "kit-judged"])
  })
})
