import { afterAll, beforeAll, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Arbitrary, Effect, FastCheck as fc, Schema } from "effect"
import type { MappedSpan } from "#src/domain/genai/MapSpan"
import { OtlpStore } from "#layers/ingest/OtlpStore"
import { spanCopyRows } from "#layers/ingest/OtlpPrepare"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { SPAN_PARTS_SELECT, spanJsonRow, type SpanPartsRow } from "#layers/traces/SpanRecords"
import { withPayloads } from "#layers/traces/SharedParts"
import { unpackPart } from "#layers/traces/PartPacking"
import { Span } from "#src/domain/Span"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// OTLP spans of traces an export creates go in by COPY on PostgreSQL (OtlpStore.insertNewSpans). What COPY stores must
// be exactly what the upsert stores, for any span: both are read back as the detail's JSON text and compared.
const backend = process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

const encodedSpan = Arbitrary.make(Span).map((span) => JSON.parse(JSON.stringify(Schema.encodeSync(Span)(span))))

/** Text that COPY's text format must escape, or could mistake for its own markers. */
const HOSTILE = ["\\N", "\\", "a\tb", "line\nbreak\r\n", "back\\slash\\n", 'quote"d', "\\.", "ünïcødé ✓ 🙂"]

const hostileSpan = (i: number) => ({
  id: crypto.randomUUID(),
  parent_id: null,
  span_type: "llm_call" as const,
  name: HOSTILE[i % HOSTILE.length]!,
  model: HOSTILE[(i + 1) % HOSTILE.length]!,
  input: { text: HOSTILE[(i + 2) % HOSTILE.length]!, list: HOSTILE },
  output: null,
  input_tokens: i,
  cost: 0.000001 * i,
  metadata: { [HOSTILE[i % HOSTILE.length]!]: HOSTILE[(i + 3) % HOSTILE.length]! },
  error: HOSTILE[(i + 4) % HOSTILE.length]!,
  started_at: "2026-01-02T03:04:05.678Z"
})

/** Writes `spans` into a fresh trace by the upsert and into another by COPY; both as the detail's JSON texts by span id. */
const writeBothWays = (spans: ReadonlyArray<MappedSpan["span"]>) =>
  storage.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* OtlpStore
      const accountId = yield* (yield* AccountRepo).ensure("otlp-copy")
      const upserted = crypto.randomUUID()
      const copied = crypto.randomUUID()
      const mapped = (traceId: string) =>
        spans.map((span): MappedSpan => ({ traceId, otelTraceId: "0".repeat(32), span }) as MappedSpan)
      yield* store.upsertSpans(accountId, mapped(upserted))
      const ran = yield* store.copySpans(accountId, mapped(copied)).pipe(sql.withTransaction)
      // Payloads assembled from their parts, as the detail reads them.
      const read = (traceId: string) =>
        sql<SpanPartsRow & { account_id: string }>`
          SELECT account_id, ${sql.literal(SPAN_PARTS_SELECT)} FROM spans WHERE trace_id = ${traceId}::uuid`.pipe(
          Effect.flatMap((rows) => withPayloads(sql, rows)),
          Effect.map((rows) => new Map(rows.map((r) => [r.id, { json: spanJsonRow(r).json, account: r.account_id }])))
        )
      return { ran, accountId, upserted: yield* read(upserted), copied: yield* read(copied) }
    }).pipe(Effect.provide([OtlpStore.Default, AccountRepo.Default]), Effect.orDie)
  )

test("COPY stores exactly what the upsert stores, for arbitrary spans", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(encodedSpan, { minLength: 1, maxLength: 10 }), async (generated) => {
      const spans = generated.map((s) => ({ ...s, id: crypto.randomUUID(), parent_id: null }))
      const { ran, upserted, copied } = await writeBothWays(spans)
      if (backend === "pglite") {
        expect(ran).toBe(false) // no node-postgres connection: nothing copied, the caller upserts
        expect(copied.size).toBe(0)
        return
      }
      expect(ran).toBe(true)
      expect(copied).toEqual(upserted)
      expect(copied.size).toBe(spans.length)
    }),
    { numRuns: backend === "pglite" ? 3 : 60 }
  )
}, 120_000)

test("COPY keeps text that its own format escapes: backslashes, tabs, newlines, \\N, \\.", async () => {
  const spans = Array.from({ length: 24 }, (_, i) => hostileSpan(i))
  const { ran, accountId, upserted, copied } = await writeBothWays(spans)
  if (backend === "pglite") return expect(ran).toBe(false)
  expect(ran).toBe(true)
  expect(copied).toEqual(upserted)
  for (const span of spans) {
    const stored = JSON.parse(copied.get(span.id)!.json)
    expect(copied.get(span.id)!.account).toBe(accountId)
    expect(stored.name).toBe(span.name)
    expect(stored.model).toBe(span.model)
    expect(stored.input).toEqual(span.input)
    expect(stored.output).toBeNull()
    expect(stored.metadata).toEqual(span.metadata)
    expect(stored.error).toBe(span.error)
  }
})

/** A model call's history as it grows: every call repeats the earlier messages (shared parts), text COPY escapes. */
const historySpans = (marker: string) => {
  const messages: Array<{ role: string; content: string }> = []
  return Array.from({ length: 12 }, (_, i) => {
    messages.push({
      role: i % 2 ? "assistant" : "user",
      content: `${marker}${i} ${HOSTILE.join(" ")} ${"x".repeat(1100)}`
    })
    const last = messages[messages.length - 1]!
    return {
      ...hostileSpan(i),
      // The newest message twice in the input (a part repeated in one payload) and again as the output.
      input: { messages: [...messages], again: [last] },
      output: [last]
    }
  })
}

test("COPY sends each shared part's text in its first row only, and stores what the upsert stores", async () => {
  const marker = `m${crypto.randomUUID().slice(0, 8)}-`
  const spans = historySpans(marker)
  const message = spanCopyRows(
    "00000000-0000-4000-8000-000000000001" as never,
    spans.map((span) => ({ traceId: crypto.randomUUID(), otelTraceId: "0".repeat(32), span }) as MappedSpan)
  ).message()
  const copyText = new TextDecoder().decode(message)
  // Parts are sent compressed (\x02 and base64, PartPacking.sentPart): each one packed, none plain.
  const packed = [...copyText.matchAll(/\x02([A-Za-z0-9+/=]+)/g)].map((m) => unpackPart(Buffer.from(m[1]!, "base64")))
  expect(packed.length).toBeGreaterThanOrEqual(spans.length)
  for (let i = 0; i < spans.length; i++) expect(copyText.split(`${marker}${i} `).length - 1).toBe(0)
  const sent = [copyText, ...packed].join("\n")
  // Each message's text appears once in the whole COPY message, though later rows hold it again by hash.
  for (let i = 0; i < spans.length; i++) expect(sent.split(`${marker}${i} `).length - 1).toBe(1)
  expect(sent).toContain("NULL")
  const { ran, upserted, copied } = await writeBothWays(spans)
  if (backend === "pglite") return expect(ran).toBe(false)
  expect(ran).toBe(true)
  expect(copied).toEqual(upserted)
  for (const span of spans) {
    const stored = JSON.parse(copied.get(span.id)!.json)
    expect(stored.input).toEqual(span.input)
    expect(stored.output).toEqual(span.output)
  }
})

test("the finalize pass reads payloads of every span but those its condition rules out (a step span's too), split or not", async () => {
  const root = crypto.randomUUID()
  const big = { messages: Array.from({ length: 4 }, (_, i) => ({ role: "user", content: `m${i} ${"x".repeat(400)}` })) }
  const spans = [
    {
      id: root,
      parent_id: null,
      span_type: "agent",
      name: "root",
      input: { q: 1 },
      started_at: "2026-01-02T03:04:05.678Z"
    },
    // A framework's step span (no otel.local_root in its metadata): its payloads are read (the finalize pass
    // copies a step's messages onto the model call under it).
    {
      id: crypto.randomUUID(),
      parent_id: root,
      span_type: "action",
      name: "step",
      input: big,
      output: { tool_calls: [1] },
      metadata: { model_step: true },
      started_at: "2026-01-02T03:04:05.678Z"
    },
    // Not a root, not a model call, and marked as no local root: left out.
    {
      id: crypto.randomUUID(),
      parent_id: root,
      span_type: "tool_call",
      name: "tool",
      input: big,
      output: "done",
      metadata: { otel: { local_root: false } },
      started_at: "2026-01-02T03:04:05.678Z"
    }
  ]
  const traceId = crypto.randomUUID()
  const read = await storage.run(
    Effect.gen(function* () {
      const store = yield* OtlpStore
      const accountId = yield* (yield* AccountRepo).ensure("otlp-finalize")
      yield* store.upsertSpans(
        accountId,
        spans.map((span) => ({ traceId, otelTraceId: "0".repeat(32), span }) as never)
      )
      return (yield* store.spansOf([traceId])).get(traceId) ?? []
    }).pipe(Effect.provide([OtlpStore.Default, AccountRepo.Default]), Effect.orDie)
  )
  const byName = new Map(read.map((s) => [s.name, s as Record<string, unknown>]))
  expect(byName.get("root")!.input).toEqual({ q: 1 })
  expect(JSON.stringify(byName.get("step")!.input)).toBe(JSON.stringify(big))
  expect(byName.get("step")!.output).toEqual({ tool_calls: [1] })
  expect("input" in byName.get("tool")!).toBe(false)
  expect("output" in byName.get("tool")!).toBe(false)
})
