import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Either, FastCheck as fc, Layer, Option } from "effect"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { gzipSync } from "node:zlib"
import type { AppConfig } from "#layers/config/AppConfig"
import { decodeOtlpJson } from "#layers/ingest/OtlpDecode"
import { OtlpIngest } from "#layers/ingest/OtlpIngest"
import { decodeJsonBody, decodeProtobufBody, prepareExport } from "#layers/ingest/OtlpPrepare"
import {
  OtlpPreparer,
  PREPARE_THREAD_MIN_BYTES,
  PREPARE_THREAD_MIN_JSON_BYTES,
  PrepareThreadScript
} from "#layers/ingest/OtlpPreparer"
import { DEFAULT_PRICES, withOverrides } from "#src/domain/pricing/Prices"
import { AccountRepo } from "#layers/storage/AccountRepo"
import type { AccountId } from "#src/domain/Ids"
import type { DecodedExport } from "#src/domain/Otlp"
import { exportBody, hex, otlpSpan, protobufBody, relabelIds } from "../support/Otlp.ts"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"
import { readStoredGroup, type StoredStreamGroup } from "#src/domain/StreamEvent"

// Large protobuf exports are prepared on another thread as if every trace in them were new (OtlpPrepare,
// OtlpPreparer), and written as prepared when they all are (OtlpIngest.ingestPrepared); otherwise, or where COPY is not
// available (PGlite), they are mapped again and written the general way. Whatever the path, what is stored must be
// what OtlpIngest.ingest stores for the same export.
let storage: TestStorage
beforeAll(async () => {
  storage = await startTestStorage()
})
afterAll(() => storage.stop())

interface TraceShape {
  readonly spans: ReadonlyArray<{
    kind: "agent" | "chat" | "tool" | "plain"
    parent: number
    start: number
    length: number
    error: boolean
    /** A chat span's usage: costs whose float sums are inexact, and token counts past what the mapping keeps (10^12). */
    cost: number | null
    tokens: number
  }>
}

const traceShape: fc.Arbitrary<TraceShape> = fc.record({
  spans: fc.array(
    fc.record({
      kind: fc.constantFrom("agent" as const, "chat" as const, "tool" as const, "plain" as const),
      parent: fc.nat(),
      start: fc.nat({ max: 10_000 }),
      length: fc.nat({ max: 5_000 }),
      error: fc.boolean(),
      cost: fc.option(fc.constantFrom(0.1, 0.2, 0.3, 1e-7, 0.000123, 12.5, 3, 1234567.891)),
      tokens: fc.oneof(fc.nat({ max: 5000 }), fc.constant(2 ** 52 + 1))
    }),
    { minLength: 1, maxLength: 8 }
  )
})

const ATTRIBUTES = {
  agent: (i: number) => ({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": `agent-${i % 3}` }),
  chat: (i: number, usage?: { cost: number | null; tokens: number }) => ({
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.usage.input_tokens": usage?.tokens ?? 10 + i,
    "gen_ai.usage.output_tokens": 3 + i,
    ...(usage?.cost != null ? { "gen_ai.usage.cost": usage.cost } : {}),
    "gen_ai.input.messages": JSON.stringify([
      { role: "user", parts: [{ type: "text", content: `question ${i} \t\\ "q"` }] }
    ]),
    "gen_ai.output.messages": JSON.stringify([
      { role: "assistant", parts: [{ type: "text", content: `answer ${i} ✓` }] }
    ])
  }),
  tool: (i: number) => ({
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": `tool_${i}`,
    "gen_ai.tool.call.arguments": JSON.stringify({ q: i, path: "C:\\tmp" }),
    "gen_ai.tool.call.result": JSON.stringify({ ok: true })
  }),
  plain: (i: number) => ({ "app.step": i })
}

/**
 * The OTLP spans of a trace of `shape`: each span's parent is an earlier span (index modulo), the first is the root.
 * No two spans of a trace start or end at the same instant: ties are broken by span UUID, which differs between the
 * two copies of an export this file compares.
 */
const otlpSpans = (traceId: string, spanIds: ReadonlyArray<string>, shape: TraceShape, offset = 0) =>
  shape.spans.map((s, i) =>
    otlpSpan({
      traceId,
      spanId: spanIds[i + offset]!,
      ...(i + offset === 0 ? {} : { parentSpanId: spanIds[s.parent % (i + offset)]! }),
      name: `${s.kind} ${i + offset}`,
      startMs: s.start * 32 + i + offset,
      endMs: (s.start + s.length) * 32 + i + offset,
      attributes: s.kind === "chat" ? ATTRIBUTES.chat(i + offset, s) : ATTRIBUTES[s.kind](i + offset),
      ...(s.error ? { status: { code: 2, message: "boom" } } : {})
    })
  )

const decoded = (body: unknown): DecodedExport => Either.getOrThrow(decodeOtlpJson(body))

/** Everything an export wrote for the traces of `otelTraceIds` (their rows, spans, jobs and stream events), ids relabelled. */
const storedOf = (otelTraceIds: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const traces = yield* sql<{ id: string }>`
      SELECT id, name, status, input, output, session_id, started_at, ended_at, metadata, environment, span_count,
             total_tokens, total_cost::text AS total_cost, total_duration_ms, models, has_error
      FROM traces WHERE metadata->'otel'->>'trace_id' = ANY(${otelTraceIds}) ORDER BY array_position(${otelTraceIds}::text[], metadata->'otel'->>'trace_id')`
    const ids = traces.map((t) => t.id)
    const spans = yield* sql`
      SELECT trace_id, id, parent_id, span_type, name, model, input, output, input_tokens, output_tokens, cost::text AS cost,
             duration_ms, metadata, agent_id, parent_agent_id, agent_role, started_at, ended_at, error, extra
      FROM spans WHERE trace_id = ANY(${ids}::uuid[])
      ORDER BY array_position(${ids}::uuid[], trace_id), metadata->'otel'->>'span_id'`
    const jobs = yield* sql`
      SELECT kind, payload FROM jobs
      WHERE payload->>'traceId' = ANY(${ids}) OR payload->'traceIds' ?| ${ids}::text[]
      ORDER BY created_at, kind, array_position(${ids}::text[], payload->>'traceId')`
    const stored = yield* sql<{ groups: ReadonlyArray<StoredStreamGroup>; events: number }>`
      SELECT groups, events FROM stream_events
      WHERE EXISTS (SELECT 1 FROM jsonb_array_elements(groups) g WHERE g->>'t' = ANY(${ids}::text[])) ORDER BY id`
    // The span ids inside a stored group are packed: read them back so they are relabelled like the others.
    const events = stored.map((e) => ({ ...e, groups: e.groups.map(readStoredGroup) }))
    return relabelIds({ traces, spans, jobs, events }, otelTraceIds)
  })

const run = <A, E>(effect: Effect.Effect<A, E, OtlpIngest | AccountRepo | SqlClient.SqlClient | AppConfig>) =>
  storage.run(
    effect.pipe(Effect.provide([OtlpIngest.Default, AccountRepo.Default]), Effect.orDie) as Effect.Effect<
      A,
      never,
      SqlClient.SqlClient | AppConfig
    >
  )

describe("prepared exports", () => {
  test("store what the request thread stores: new traces, traces stored earlier, spans sent again", async () => {
    const accountId = await run(Effect.flatMap(AccountRepo, (a) => a.ensure("otlp-prepare")))
    await fc.assert(
      fc.asyncProperty(
        fc.array(traceShape, { minLength: 1, maxLength: 4 }),
        fc.array(fc.tuple(fc.nat(), traceShape), { maxLength: 3 }),
        fc.array(traceShape, { maxLength: 2 }),
        async (first, continued, fresh) => {
          // Two copies of the same exports under different trace ids: one written by `ingest`, one prepared.
          const write = (traceIds: ReadonlyArray<string>, prepared: boolean) =>
            run(
              Effect.gen(function* () {
                const ingest = yield* OtlpIngest
                const spanIds = first.map((t) =>
                  Array.from({ length: t.spans.length + 8 }, (_, i) => `${traceIds.length}${i}`.padStart(16, "0"))
                )
                const firstBody = exportBody(first.flatMap((t, i) => otlpSpans(traceIds[i]!, spanIds[i]!, t)))
                // The second export: spans added to traces of the first (span ids after theirs, and one sent again), and new traces.
                const secondBody = exportBody([
                  ...continued.flatMap(([n, t]) => {
                    const at = n % first.length
                    const again = otlpSpans(traceIds[at]!, spanIds[at]!, first[at]!).slice(0, 1)
                    return [
                      ...again,
                      ...otlpSpans(traceIds[at]!, spanIds[at]!, { spans: t.spans.slice(0, 8) }, first[at]!.spans.length)
                    ]
                  }),
                  ...fresh.flatMap((t, i) => otlpSpans(traceIds[first.length + i]!, spanIds[0]!, t))
                ])
                const results = []
                for (const body of [firstBody, secondBody]) {
                  const export_ = decoded(body)
                  results.push(
                    prepared
                      ? yield* ingest.ingestPrepared(accountId, prepareExport(accountId, export_), () => export_)
                      : yield* ingest.ingest(accountId, export_)
                  )
                }
                return { results, stored: yield* storedOf(traceIds) }
              })
            )
          const traceCount = first.length + fresh.length
          const viaIngest = await write(
            Array.from({ length: traceCount }, () => hex(16)),
            false
          )
          const viaPrepared = await write(
            Array.from({ length: traceCount }, () => hex(16)),
            true
          )
          expect(viaPrepared.results).toEqual(viaIngest.results)
          expect(viaPrepared.stored).toEqual(viaIngest.stored)
        }
      ),
      {
        numRuns: 25,
        // Always: a trace whose costs do not add up exactly in floating point, with the largest token counts.
        examples: [
          [
            [
              {
                spans: [0.1, 0.2, 0.3].map((cost, i) => ({
                  kind: "chat" as const,
                  parent: 0,
                  start: i,
                  length: 1,
                  error: false,
                  cost,
                  tokens: 2 ** 52 + 1
                }))
              }
            ],
            [],
            []
          ]
        ]
      }
    )
  }, 120_000)
})

/** Runs `effect` with an OtlpPreparer configured by `env` (a real thread, stopped afterwards), optionally on another entry module. */
const withPreparer = <A>(env: Record<string, string>, effect: Effect.Effect<A, never, OtlpPreparer>, script?: string) =>
  Effect.runPromise(
    effect.pipe(
      Effect.provide(
        OtlpPreparer.Default.pipe(
          Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
          Layer.provide(script === undefined ? Layer.empty : Layer.succeed(PrepareThreadScript, script))
        )
      )
    )
  )

const ACCOUNT = "0b0e8c1a-3c55-4d7e-9f4e-1a2b3c4d5e6f" as AccountId

/** A protobuf export of `traces` traces of 20 chat spans each (~16 KiB a trace); as OTLP/JSON with `json`. */
const largeBody = (traces: number, json = false) => {
  const spans = Array.from({ length: traces }, () => {
    const traceId = hex(16)
    const ids = Array.from({ length: 20 }, () => hex(8))
    return ids.map((spanId, i) =>
      otlpSpan({
        traceId,
        spanId,
        ...(i === 0 ? {} : { parentSpanId: ids[0]! }),
        startMs: i,
        endMs: i + 500,
        attributes: { ...ATTRIBUTES.chat(i), "app.padding": hex(300) }
      })
    )
  }).flat()
  return json ? new TextEncoder().encode(JSON.stringify(exportBody(spans))) : protobufBody(exportBody(spans))
}

describe("the preparing thread", () => {
  const ON = { DATABASE_URL: "postgres://unused/db" }

  test("prepares what prepareExport makes on this thread, for each of several exports in flight", async () => {
    const bodies = [largeBody(6), largeBody(8), largeBody(10)]
    expect(bodies.every((b) => b.byteLength >= PREPARE_THREAD_MIN_BYTES)).toBe(true)
    const answers = await withPreparer(
      ON,
      Effect.flatMap(OtlpPreparer, (p) =>
        Effect.all(
          bodies.map((body) => p.prepare(ACCOUNT, "protobuf", body, undefined)),
          { concurrency: "unbounded" }
        )
      )
    )
    answers.forEach((answer, i) => {
      const expected = prepareExport(ACCOUNT, Either.getOrThrow(decodeProtobufBody(bodies[i]!, undefined, 1 << 30)))
      expect(answer).toEqual(
        Option.some({ _tag: "Prepared", prepared: { ...expected, copy: new Uint8Array(expected.copy) } })
      )
    })
  }, 60_000)

  test("estimates missing costs with the server's price table, overrides included", async () => {
    const overrides = { "gpt-4o": { input_per_mtok: 7, output_per_mtok: 70 } }
    const body = largeBody(6)
    const [answer] = await withPreparer(
      { ...ON, TAPEDECK_MODEL_PRICES: JSON.stringify(overrides) },
      Effect.flatMap(OtlpPreparer, (p) => Effect.all([p.prepare(ACCOUNT, "protobuf", body, undefined)]))
    )
    const decodedBody = Either.getOrThrow(decodeProtobufBody(body, undefined, 1 << 30))
    const expected = prepareExport(ACCOUNT, decodedBody, withOverrides(DEFAULT_PRICES, overrides))
    expect(answer).toEqual(
      Option.some({ _tag: "Prepared", prepared: { ...expected, copy: new Uint8Array(expected.copy) } })
    )
    // The chat spans carry no cost: each got 7 and 70 USD per million tokens, not the default table's price.
    const costs = expected.traces[0]!.totals.costs.map(Number)
    expect(costs.length).toBe(20)
    expect(costs[0]).toBe((10 * 7 + 3 * 70) / 1e6)
    expect(prepareExport(ACCOUNT, decodedBody).traces[0]!.totals.costs.map(Number)[0]).toBe((10 * 2.5 + 3 * 10) / 1e6)
  }, 60_000)

  test("decompresses, and refuses a body it cannot decode with the request thread's message", async () => {
    const gzipped = gzipSync(largeBody(12))
    expect(gzipped.byteLength).toBeGreaterThanOrEqual(PREPARE_THREAD_MIN_BYTES)
    const corrupt = Buffer.concat([
      Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f]),
      Buffer.alloc(PREPARE_THREAD_MIN_BYTES, 7)
    ])
    const notGzip = Buffer.alloc(PREPARE_THREAD_MIN_BYTES, 1)
    const [zipped, bad, badZip] = await withPreparer(
      ON,
      Effect.flatMap(OtlpPreparer, (p) =>
        Effect.all([
          p.prepare(ACCOUNT, "protobuf", gzipped, "gzip"),
          p.prepare(ACCOUNT, "protobuf", corrupt, undefined),
          p.prepare(ACCOUNT, "protobuf", notGzip, "gzip")
        ])
      )
    )
    const expected = prepareExport(ACCOUNT, Either.getOrThrow(decodeProtobufBody(gzipped, "gzip", 1 << 30)))
    expect(zipped).toEqual(
      Option.some({ _tag: "Prepared", prepared: { ...expected, copy: new Uint8Array(expected.copy) } })
    )
    const refusal = (body: Uint8Array, encoding: string | undefined) =>
      Option.some({
        _tag: "Refused" as const,
        message: Either.getOrThrow(Either.flip(decodeProtobufBody(body, encoding, 1 << 30)))
      })
    expect(bad).toEqual(refusal(corrupt, undefined))
    expect(badZip).toEqual(refusal(notGzip, "gzip"))
    expect(JSON.stringify(bad)).toContain("not an OTLP protobuf ExportTraceServiceRequest")
    expect(JSON.stringify(badZip)).toContain("not valid gzip data")
  }, 60_000)

  test("prepares OTLP/JSON exports from a smaller size, and refuses a bad one with the request thread's message", async () => {
    const body = largeBody(2, true)
    expect(body.byteLength).toBeGreaterThanOrEqual(PREPARE_THREAD_MIN_JSON_BYTES)
    expect(body.byteLength).toBeLessThan(PREPARE_THREAD_MIN_BYTES)
    const gzipped = gzipSync(largeBody(12, true))
    expect(gzipped.byteLength).toBeGreaterThanOrEqual(PREPARE_THREAD_MIN_JSON_BYTES)
    const notJson = Buffer.alloc(PREPARE_THREAD_MIN_JSON_BYTES, 0x7b)
    const notOtlp = new TextEncoder().encode(
      JSON.stringify({ resourceSpans: "x".repeat(PREPARE_THREAD_MIN_JSON_BYTES) })
    )
    const small = new TextEncoder().encode(JSON.stringify({ resourceSpans: [] }))
    const answers = await withPreparer(
      ON,
      Effect.flatMap(OtlpPreparer, (p) =>
        Effect.all([
          p.prepare(ACCOUNT, "json", body, undefined),
          p.prepare(ACCOUNT, "json", gzipped, "gzip"),
          p.prepare(ACCOUNT, "json", notJson, undefined),
          p.prepare(ACCOUNT, "json", notOtlp, undefined),
          p.prepare(ACCOUNT, "json", small, undefined)
        ])
      )
    )
    const prepared = (b: Uint8Array, encoding: string | undefined) => {
      const expected = prepareExport(ACCOUNT, Either.getOrThrow(decodeJsonBody(b, encoding, 1 << 30)))
      return Option.some({ _tag: "Prepared" as const, prepared: { ...expected, copy: new Uint8Array(expected.copy) } })
    }
    const refusal = (message: string) => Option.some({ _tag: "Refused" as const, message })
    expect(answers).toEqual([
      prepared(body, undefined),
      prepared(gzipped, "gzip"),
      refusal("request body is not valid JSON"),
      refusal("not an OTLP ExportTraceServiceRequest: resourceSpans must be an array of at most 100 objects"),
      Option.none()
    ])
    // The same spans as the protobuf form of the export.
    const [fromJson] = answers
    expect(Option.isSome(fromJson) && fromJson.value._tag === "Prepared" && fromJson.value.prepared.spanCount).toBe(40)
  }, 60_000)

  test("is not used for small bodies, without DATABASE_URL (PGlite cannot COPY) or when turned off", async () => {
    const body = largeBody(6)
    const small = largeBody(1)
    expect(small.byteLength).toBeLessThan(PREPARE_THREAD_MIN_BYTES)
    const prepare = (env: Record<string, string>, b: Uint8Array) =>
      withPreparer(
        env,
        Effect.flatMap(OtlpPreparer, (p) => p.prepare(ACCOUNT, "protobuf", b, undefined))
      )
    expect(Option.isSome(await prepare(ON, body))).toBe(true)
    expect(await prepare(ON, small)).toEqual(Option.none())
    expect(await prepare({}, body)).toEqual(Option.none())
    expect(await prepare({ ...ON, TAPEDECK_INGEST_PREPARE_THREAD: "false" }, body)).toEqual(Option.none())
  }, 60_000)

  test.skipIf(!existsSync("/proc/thread-self"))(
    "the thread runs at TAPEDECK_INGEST_PREPARE_THREAD_NICE, the request thread as it was",
    async () => {
      /** This process's threads: id, name and nice value (field 19 of stat, the 17th after the name). */
      const threads = () =>
        readdirSync("/proc/self/task").map((id) => {
          const stat = readFileSync(`/proc/self/task/${id}/stat`, "utf8")
          const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))
          return { id, name, nice: Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]) }
        })
      const body = largeBody(6)
      /** The nice values of the worker threads started while an export was prepared with `nice`. */
      const started = async (nice: string) => {
        const before = new Set(threads().map((t) => t.id))
        const during = await withPreparer(
          { ...ON, TAPEDECK_INGEST_PREPARE_THREAD_NICE: nice },
          Effect.flatMap(OtlpPreparer, (p) => p.prepare(ACCOUNT, "protobuf", body, undefined)).pipe(
            Effect.tap((prepared) => Effect.sync(() => expect(Option.isSome(prepared)).toBe(true))),
            Effect.map(threads)
          )
        )
        return during.filter((t) => t.name === "Worker" && !before.has(t.id)).map((t) => t.nice)
      }
      // The thread, and any helper thread it starts after lowering itself (which inherits its nice value).
      const lowered = await started("7")
      expect(lowered.length).toBeGreaterThanOrEqual(1)
      expect(lowered.every((nice) => nice === 7)).toBe(true)
      const left = await started("0")
      expect(left.length).toBeGreaterThanOrEqual(1)
      expect(left.every((nice) => nice === 0)).toBe(true)
      expect(threads().find((t) => t.id === String(process.pid))?.nice).toBe(0)
    },
    60_000
  )

  test("a thread that dies or throws leaves its exports to the request thread, and the next export gets a new one", async () => {
    const body = largeBody(6)
    for (const fixture of ["exits.ts", "throws.ts"]) {
      const script = new URL(`../fixtures/prepare-threads/${fixture}`, import.meta.url).href
      const answers = await withPreparer(
        ON,
        Effect.flatMap(OtlpPreparer, (p) =>
          Effect.all([
            Effect.all(
              [p.prepare(ACCOUNT, "protobuf", body, undefined), p.prepare(ACCOUNT, "protobuf", body, undefined)],
              {
                concurrency: "unbounded"
              }
            ),
            p.prepare(ACCOUNT, "protobuf", body, undefined)
          ]).pipe(Effect.timeout("20 seconds"), Effect.orDie)
        ),
        script
      )
      expect(answers).toEqual([[Option.none(), Option.none()], Option.none()])
    }
  }, 60_000)
})
