/**
 * Tapedeck's test kit for extensions (docs/extensions.md): the real server, with extensions composed in, over a
 * fresh database (in-memory PGlite, or a new database on TEST_DATABASE_URL's PostgreSQL server), and fast-check
 * arbitraries derived from the API's schemas.
 */
import { HttpServer } from "@effect/platform"
import { BunContext, BunHttpServer } from "@effect/platform-bun"
import { SqlClient } from "@effect/sql"
import {
  Arbitrary,
  ConfigProvider,
  Effect,
  FastCheck as fc,
  Layer,
  Logger,
  LogLevel,
  ManagedRuntime,
  Schema
} from "effect"
import pg from "pg"
import type { ModelProvider } from "#layers/extensions/Providers"
import { otlpProtoRoot } from "#layers/ingest/OtlpDecode"
import type { ChatRequest, ChatResponse } from "#layers/llm/LlmClient"
import { StorageLive } from "#layers/storage/Sql"
import { AppLive } from "../app/AppLive.ts"
import { type Extension, extend, modelClient } from "../index.ts"
import { Span } from "../domain/Span.ts"
import { CreateTraceRequest } from "../domain/Trace.ts"
import { EnforcementCheckRequest } from "../domain/Enforcement.ts"

export interface TestServerOptions {
  /** Extensions composed into the server, in order (see `extend`). */
  readonly extensions?: ReadonlyArray<Extension<unknown>>
  /** Configuration (docs/configuration.md) beside the kit's: two accounts' API keys, a fast job poll. */
  readonly env?: Readonly<Record<string, string>>
}

export interface TestServer {
  readonly url: string
  readonly backend: "pglite" | "postgresql"
  /** The API keys of the two accounts the server starts with, "acme" and "globex". */
  readonly keys: { readonly acme: string; readonly globex: string }
  /**
   * A request with the acme key unless `key` says otherwise (`null`: no key). A body that is not a string or bytes
   * is sent as JSON.
   */
  readonly request: (
    method: string,
    path: string,
    options?: { readonly key?: string | null; readonly body?: unknown; readonly headers?: Record<string, string> }
  ) => Promise<Response>
  /** Runs SQL on the server's own database (its rows as they are stored); `$1`… are `params`. */
  readonly query: <Row = Record<string, unknown>>(
    sql: string,
    params?: ReadonlyArray<unknown>
  ) => Promise<ReadonlyArray<Row>>
  readonly stop: () => Promise<void>
}

const KEYS = { acme: "svc_kit_key_acme_0001", globex: "svc_kit_key_globex_0002" } as const

/** A new empty database for the caller to pass in `env` to several servers in turn (`drop` when done). */
export const freshDatabase = async (): Promise<{
  env: Record<string, string>
  backend: TestServer["backend"]
  drop: () => Promise<void>
}> => {
  const base = process.env.TEST_DATABASE_URL
  if (!base) return { env: { TAPEDECK_DATA_DIR: "memory://" }, backend: "pglite", drop: async () => {} }
  const name = `tapedeck_kit_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(base)
  url.pathname = `/${name}`
  return {
    env: { DATABASE_URL: url.toString() },
    backend: "postgresql",
    drop: async () => {
      const client = new pg.Client({ connectionString: base })
      await client.connect()
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await client.end()
    }
  }
}

/** The real application on Bun's HTTP server (an ephemeral port) with the extensions composed in. */
export const startServer = async (options: TestServerOptions = {}): Promise<TestServer> => {
  // A database named in `env` is the caller's (a restart over the same data): it is neither created nor dropped.
  const own = options.env?.DATABASE_URL !== undefined || options.env?.TAPEDECK_DATA_DIR !== undefined
  const database = own
    ? {
        env: {},
        backend: options.env?.DATABASE_URL ? ("postgresql" as const) : ("pglite" as const),
        drop: async () => {}
      }
    : await freshDatabase()
  const env = {
    TAPEDECK_API_KEYS: `acme=${KEYS.acme},globex=${KEYS.globex}`,
    TAPEDECK_JOB_POLL_MS: "50",
    ...database.env,
    ...options.env
  }
  const app = AppLive.pipe(Layer.provideMerge(StorageLive))
  const layer = extend(...(options.extensions ?? []))(app).pipe(
    Layer.provideMerge(BunHttpServer.layer({ port: 0, hostname: "127.0.0.1" })),
    Layer.provide(BunContext.layer),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Error)),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
  )
  const runtime = ManagedRuntime.make(layer)
  const server = await runtime.runPromise(HttpServer.HttpServer).catch(async (e) => {
    await runtime.dispose()
    await database.drop()
    throw e
  })
  const url = `http://127.0.0.1:${(server.address as HttpServer.TcpAddress).port}`
  const request: TestServer["request"] = (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers }
    const key = opts.key === undefined ? KEYS.acme : opts.key
    if (key !== null) headers["x-service-key"] = key
    let body: string | Uint8Array | undefined
    if (opts.body instanceof Uint8Array) body = opts.body
    else if (opts.body !== undefined) {
      body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body)
      headers["content-type"] ??= "application/json"
    }
    return fetch(url + path, { method, headers, ...(body === undefined ? {} : { body }) })
  }
  const query: TestServer["query"] = (text, params = []) =>
    runtime.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(text, params as Array<never>)).pipe(
        Effect.map((rows) => rows as ReadonlyArray<never>)
      )
    )
  return {
    url,
    backend: database.backend,
    keys: KEYS,
    request,
    query,
    stop: async () => {
      await runtime.dispose()
      await database.drop()
    }
  }
}

/** Spans as the API takes them (JSON), generated from the Span schema. */
export const spanArbitrary: fc.Arbitrary<typeof Span.Encoded> = Arbitrary.make(Span).map(Schema.encodeSync(Span))

// A fake model: a scripted in-process model client for the judge and server replay.

/** What a scripted answer may be: the assistant's text, or more of the response (model, tool calls, usage). */
export type FakeAnswer =
  | string
  | {
      readonly content?: string | null
      readonly tool_calls?: unknown
      readonly model?: string
      readonly usage?: { readonly inputTokens: number; readonly outputTokens: number }
      readonly finishReason?: string | null
    }

export interface FakeModelOptions {
  /** The client's name (`model client "<name>" failed: …` in errors); default "fake-model". */
  readonly name?: string
  /** The model of a replayed span that recorded none. */
  readonly defaultModel?: string
  /**
   * The answer to one request (`call` counts from 1), or an effect of it: a failed effect is the model's failure.
   * Default: `judgeAnswer(1, "scripted")`, which the judge scores and replay records as the new output.
   */
  readonly answer?: (request: ChatRequest, call: number) => FakeAnswer | Effect.Effect<FakeAnswer, unknown>
}

export interface FakeModel {
  /** The extension installing it: pass it in `startServer({ extensions })` or to `Tapedeck.extend`. */
  readonly layer: Layer.Layer<ModelProvider>
  /** Every request received, in order. */
  readonly requests: ReadonlyArray<ChatRequest>
  /** Every message text of every request (what the model was told), in order. */
  readonly prompts: () => ReadonlyArray<string>
}

/** A judge's answer: the JSON object the LLM judge reads. */
export const judgeAnswer = (score: number, reason = "scripted"): string => JSON.stringify({ score, reason })

/** What a judge request asks about (the trace's name and the criterion), or undefined for another request. */
export const judgeRequestOf = (request: ChatRequest): { traceName: string; criterion: string } | undefined => {
  const text = request.messages.map((m) => (typeof m.content === "string" ? m.content : "")).join("\n")
  const traceName = /^Trace: (.*) — status/m.exec(text)?.[1]
  const criterion = /^Criterion: (.*)$/m.exec(text)?.[1]
  return traceName === undefined || criterion === undefined ? undefined : { traceName, criterion }
}

const approxTokens = (text: string) => Math.ceil(text.length / 4)

/** A scripted model client, in process (no HTTP): records every request and answers with `options.answer`. */
export const fakeModel = (options: FakeModelOptions = {}): FakeModel => {
  const requests: Array<ChatRequest> = []
  const answer = options.answer ?? (() => judgeAnswer(1))
  const layer = modelClient({
    name: options.name ?? "fake-model",
    ...(options.defaultModel === undefined ? {} : { defaultModel: options.defaultModel }),
    chat: (request) =>
      Effect.suspend(() => {
        requests.push(request)
        const scripted = answer(request, requests.length)
        return Effect.isEffect(scripted) ? scripted : Effect.succeed(scripted)
      }).pipe(
        Effect.map((a): ChatResponse => {
          const reply = typeof a === "string" ? { content: a } : a
          const content = reply.content ?? null
          const prompt = request.messages.map((m) => (typeof m.content === "string" ? m.content : "")).join("\n")
          return {
            model: reply.model ?? request.model,
            message: {
              role: "assistant",
              content,
              ...(reply.tool_calls === undefined ? {} : { tool_calls: reply.tool_calls })
            },
            usage: reply.usage ?? { inputTokens: approxTokens(prompt), outputTokens: approxTokens(content ?? "") },
            finishReason: reply.finishReason ?? (reply.tool_calls === undefined ? "stop" : "tool_calls")
          }
        })
      )
  })
  return {
    layer,
    requests,
    prompts: () => requests.flatMap((r) => r.messages.map((m) => (typeof m.content === "string" ? m.content : "")))
  }
}

// Arbitraries of what the API takes, derived from its schemas.

/** Unbiased v4 UUIDs: fast-check's default bias repeats small ones, and a repeated id is a 409. */
const freshUuid = fc.noBias(fc.uuid({ version: 4 }))
const hexOf = (bytes: number) =>
  fc.noBias(
    fc
      .uint8Array({ minLength: bytes, maxLength: bytes })
      .filter((b) => b.some((x) => x !== 0))
      .map((b) => [...b].map((x) => x.toString(16).padStart(2, "0")).join(""))
  )

/**
 * Bodies of `POST /api/v1/traces` (the JSON the API takes), from the CreateTraceRequest schema, with 0 to 5 spans
 * from `spanArbitrary` as one tree (the first is the root, each other's parent is an earlier span) and fresh ids.
 */
export type TraceBody = Omit<typeof CreateTraceRequest.Encoded, "spans"> & {
  readonly spans: ReadonlyArray<typeof Span.Encoded>
}
export const traceArbitrary: fc.Arbitrary<TraceBody> = fc
  .tuple(
    Arbitrary.make(CreateTraceRequest.pipe(Schema.omit("spans"))).map(
      Schema.encodeSync(CreateTraceRequest.pipe(Schema.omit("spans")))
    ),
    freshUuid,
    fc.array(fc.tuple(spanArbitrary, freshUuid, fc.nat()), { maxLength: 5 })
  )
  .map(([trace, id, spans]): TraceBody => {
    const ids = spans.map(([, spanId]) => spanId)
    return {
      ...trace,
      id,
      spans: spans.map(([span, spanId, parent], i) => ({
        ...span,
        id: spanId,
        parent_id: i === 0 ? null : ids[parent % i]!
      }))
    }
  })

/** Bodies of `POST /api/v1/enforcement/check`, from the EnforcementCheckRequest schema (a fresh run each). */
export const checkArbitrary: fc.Arbitrary<typeof EnforcementCheckRequest.Encoded> = Arbitrary.make(
  EnforcementCheckRequest
)
  .map(Schema.encodeSync(EnforcementCheckRequest))
  .chain((check) =>
    fc.option(freshUuid, { nil: undefined }).map((traceId) => {
      const { trace_id: _, ...rest } = check
      return traceId === undefined ? rest : { ...rest, trace_id: traceId }
    })
  )

/** An OTLP/JSON AnyValue holding a string, boolean, int64 (as a decimal string), double, or an array of strings. */
const otlpValue = fc.oneof(
  fc.string({ maxLength: 40 }).map((stringValue) => ({ stringValue })),
  fc.boolean().map((boolValue) => ({ boolValue })),
  fc.integer({ min: -1e9, max: 1e9 }).map((n) => ({ intValue: String(n) })),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((doubleValue) => ({ doubleValue })),
  fc
    .array(fc.string({ maxLength: 20 }), { maxLength: 3 })
    .map((values) => ({ arrayValue: { values: values.map((stringValue) => ({ stringValue })) } }))
)
const attributeKey = fc.stringMatching(/^[a-z][a-z0-9_]{0,12}(\.[a-z0-9_]{1,12}){0,2}$/)
const keyValue = (key: string, value: unknown) => ({ key, value })

/** The GenAI semantic conventions' attributes of a model call, a tool call or an agent step. */
const genAiAttributes = fc.oneof(
  fc
    .record({
      model: fc.constantFrom("gpt-4o-mini", "gpt-4.1", "claude-sonnet-4", "llama-3.1-8b"),
      input: fc.nat({ max: 100_000 }),
      output: fc.nat({ max: 10_000 }),
      prompt: fc.string({ maxLength: 80 }),
      completion: fc.string({ maxLength: 80 })
    })
    .map(({ model, input, output, prompt, completion }) => [
      keyValue("gen_ai.operation.name", { stringValue: "chat" }),
      keyValue("gen_ai.system", { stringValue: "openai" }),
      keyValue("gen_ai.request.model", { stringValue: model }),
      keyValue("gen_ai.usage.input_tokens", { intValue: String(input) }),
      keyValue("gen_ai.usage.output_tokens", { intValue: String(output) }),
      keyValue("gen_ai.input.messages", { stringValue: JSON.stringify([{ role: "user", content: prompt }]) }),
      keyValue("gen_ai.output.messages", {
        stringValue: JSON.stringify([{ role: "assistant", content: completion }])
      })
    ]),
  fc
    .record({ tool: fc.stringMatching(/^[a-z_]{1,20}$/), args: fc.string({ maxLength: 60 }) })
    .map(({ tool, args }) => [
      keyValue("gen_ai.operation.name", { stringValue: "execute_tool" }),
      keyValue("gen_ai.tool.name", { stringValue: tool }),
      keyValue("gen_ai.tool.call.arguments", { stringValue: args })
    ]),
  fc
    .stringMatching(/^[a-z-]{1,20}$/)
    .map((agent) => [
      keyValue("gen_ai.operation.name", { stringValue: "invoke_agent" }),
      keyValue("gen_ai.agent.name", { stringValue: agent })
    ])
)

/** One OTLP/JSON span of `traceId`, its parent chosen among `earlier` span ids (none: a root). */
const otlpSpanOf = (traceId: string, earlier: ReadonlyArray<string>) =>
  fc
    .record({
      spanId: hexOf(8),
      parent: fc.nat(),
      name: fc.string({ minLength: 1, maxLength: 60 }),
      kind: fc.integer({ min: 0, max: 5 }),
      // 2000-01-01 to 2100-01-01, in whole milliseconds; a duration up to an hour.
      startMs: fc.integer({ min: 946_684_800_000, max: 4_102_444_800_000 }),
      durationMs: fc.integer({ min: 0, max: 3_600_000 }),
      genAi: genAiAttributes,
      extra: fc.uniqueArray(fc.tuple(attributeKey, otlpValue), { maxLength: 4, selector: ([k]) => k }),
      status: fc.constantFrom(0, 1, 2)
    })
    .map((s) => ({
      traceId,
      spanId: s.spanId,
      ...(earlier.length === 0 ? {} : { parentSpanId: earlier[s.parent % earlier.length]! }),
      name: s.name,
      kind: s.kind,
      startTimeUnixNano: `${s.startMs}000000`,
      endTimeUnixNano: `${s.startMs + s.durationMs}000000`,
      attributes: [...s.genAi, ...s.extra.filter(([k]) => !k.startsWith("gen_ai.")).map(([k, v]) => keyValue(k, v))],
      status: { code: s.status }
    }))

type OtlpJsonSpan = { readonly spanId: string } & Record<string, unknown>

/** The spans of one OTLP trace (1 to 4), parents before children. */
const otlpTraceSpans = hexOf(16).chain((traceId) => {
  const grow = (spans: ReadonlyArray<OtlpJsonSpan>, left: number): fc.Arbitrary<ReadonlyArray<OtlpJsonSpan>> =>
    left === 0
      ? fc.constant(spans)
      : otlpSpanOf(
          traceId,
          spans.map((s) => s.spanId)
        ).chain((span) => grow([...spans, span], left - 1))
  return fc.integer({ min: 1, max: 4 }).chain((count) => grow([], count))
})

/**
 * OTLP/JSON ExportTraceServiceRequest bodies (`POST /v1/traces`) of 1 to 3 traces with GenAI attributes (a model
 * call, a tool call or an agent step each), under one resource (`service.name`) and scope. The OtlpJsonRequest
 * schema leaves the spans open (OTLP is its own contract), so these follow the OTLP/JSON encoding directly.
 */
export const otlpExportArbitrary = fc
  .record({
    service: fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/),
    traces: fc.array(otlpTraceSpans, { minLength: 1, maxLength: 3 })
  })
  .map(({ service, traces }) => ({
    resourceSpans: [
      {
        resource: { attributes: [keyValue("service.name", { stringValue: service })] },
        scopeSpans: [{ scope: { name: "tapedeck-kit", version: "1.0.0" }, spans: traces.flat() }]
      }
    ]
  }))

const ExportRequest = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")

/**
 * The protobuf encoding of an OTLP/JSON export (send it with `content-type: application/x-protobuf`): hex ids
 * become bytes, the rest is converted by its field names.
 */
export const otlpProtobuf = (body: unknown): Uint8Array => {
  const withBytes = JSON.parse(JSON.stringify(body), (key, value) =>
    ["traceId", "spanId", "parentSpanId"].includes(key) && typeof value === "string" ? Buffer.from(value, "hex") : value
  )
  return ExportRequest.encode(ExportRequest.fromObject(withBytes)).finish()
}
