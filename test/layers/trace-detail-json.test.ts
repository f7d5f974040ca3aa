import { afterAll, beforeAll, expect, test } from "bun:test"
import { Arbitrary, Effect, FastCheck as fc, Schema } from "effect"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { TraceRepo } from "#layers/traces/TraceRepo"
import { Traces } from "#layers/traces/Traces"
import type { TraceId } from "#src/domain/Ids"
import { Span } from "#src/domain/Span"
import { CreateTraceRequest } from "#src/domain/Trace"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"
import { trace } from "../support/Fixtures.ts"

// GET /api/v1/traces/{id} answers with JSON text built around the payloads PostgreSQL prints (SpanRecords.spanJsonRow);
// it must be the same document as the one built from parsed rows (`Traces.get`), for any span.
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

const encodedSpan = Arbitrary.make(Span).map((span) => JSON.parse(JSON.stringify(Schema.encodeSync(Span)(span))))

/** 1–12 arbitrary spans with fresh ids, each parented to an earlier one or to nothing (a valid batch). */
const spanBatch = fc.array(fc.tuple(encodedSpan, fc.nat()), { minLength: 1, maxLength: 12 }).map((items) => {
  const ids = items.map(() => crypto.randomUUID())
  return items.map(([span, pick], i) => ({
    ...span,
    id: ids[i],
    parent_id: i === 0 || pick % 3 === 0 ? null : ids[pick % i]
  }))
})

test("the detail's JSON text equals the document built from parsed rows, for arbitrary spans", async () => {
  const run = (spans: ReadonlyArray<unknown>) =>
    storage.run(
      Effect.gen(function* () {
        const traces = yield* Traces
        const accountId = yield* (yield* AccountRepo).ensure("detail-json")
        const request = Schema.decodeUnknownSync(CreateTraceRequest)(trace({ spans }))
        yield* traces.create(accountId, request)
        const fromRows = yield* traces.get(accountId, request.id as TraceId)
        const text = yield* traces.getJson(accountId, request.id as TraceId)
        return { fromRows: JSON.parse(JSON.stringify(fromRows)), text }
      }).pipe(Effect.provide([Traces.Default, TraceRepo.Default, AccountRepo.Default]))
    )

  await fc.assert(
    fc.asyncProperty(spanBatch, async (spans) => {
      const { fromRows, text } = await run(spans)
      const parsed = JSON.parse(text)
      expect(parsed).toEqual(fromRows)
      // Same keys in the same order, span by span (clients that diff documents see no churn).
      expect(parsed.spans.map((s: object) => Object.keys(s))).toEqual(fromRows.spans.map((s: object) => Object.keys(s)))
      expect(Object.keys(parsed)).toEqual(Object.keys(fromRows))
    }),
    { numRuns: 40 }
  )
}, 120_000)

test("control characters anywhere in a span come back intact", async () => {
  const odd = "a\u0001b\u0002c\u001fd\u007fe"
  const spans = [
    {
      id: crypto.randomUUID(),
      parent_id: null,
      span_type: "tool_call",
      name: `tool${odd}`,
      input: { [`key${odd}`]: [odd, { nested: odd }] },
      output: odd,
      metadata: { note: odd },
      error: odd,
      [`custom${odd}`]: { [odd]: odd },
      started_at: "2026-11-23T10:00:00.123Z",
      ended_at: "2026-11-23T10:00:01.456Z"
    },
    {
      id: crypto.randomUUID(),
      parent_id: null,
      span_type: "llm_call",
      name: "second",
      started_at: "2026-11-23T10:00:02Z"
    }
  ]
  const { fromRows, text } = await storage.run(
    Effect.gen(function* () {
      const traces = yield* Traces
      const accountId = yield* (yield* AccountRepo).ensure("detail-json-control")
      const request = Schema.decodeUnknownSync(CreateTraceRequest)(trace({ spans }))
      yield* traces.create(accountId, request)
      const fromRows = yield* traces.get(accountId, request.id as TraceId)
      return {
        fromRows: JSON.parse(JSON.stringify(fromRows)),
        text: yield* traces.getJson(accountId, request.id as TraceId)
      }
    }).pipe(Effect.provide([Traces.Default, TraceRepo.Default, AccountRepo.Default]))
  )
  const parsed = JSON.parse(text)
  expect(parsed).toEqual(fromRows)
  expect(parsed.spans).toHaveLength(2)
  const first = parsed.spans.find((s: { span_type: string }) => s.span_type === "tool_call")
  expect(first).toMatchObject({ name: `tool${odd}`, output: odd, error: odd, [`custom${odd}`]: { [odd]: odd } })
}, 60_000)
