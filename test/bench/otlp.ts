/**
 * OTLP ingestion benchmark against a real PostgreSQL (not a test file: run it with `bun test/bench/otlp.ts`).
 *
 * 1. Creates a fresh database on BENCH_DATABASE_URL's server and starts the service (`bun src/app/main.ts`) on it
 *    as a separate process, so this client never shares the server's event loop. After the warm-up it runs
 *    ANALYZE: without planner statistics the server's read-back queries scan the whole spans table.
 * 2. Ingest: POST /v1/traces with protobuf ExportTraceServiceRequests (encoded with the server's own OTLP
 *    protos) of BENCH_TRACES traces × BENCH_SPANS_PER_TRACE GenAI spans each (a root `invoke_agent` span
 *    with `chat` and `execute_tool` children carrying message JSON), fresh trace ids in every request,
 *    BENCH_CONCURRENCY requests in flight, for BENCH_SECONDS (after a warm-up). Counts the `spans_ingested`
 *    of 200 responses only; 503s are counted apart. Reports spans/s and request latency.
 * 3. Ceiling, before the ingest, once the warm-up's jobs have run (the quiet service): bare PostgreSQL
 *    `COPY ... FROM STDIN` of BENCH_CEILING_ROWS rows into `spans_copy (LIKE spans INCLUDING ALL)` (same columns,
 *    primary key and index), in batches of one request's span count over BENCH_CONCURRENCY connections. The rows
 *    are a sample of what the warm-up stored (the spans of BENCH_TRACES whole traces, so span types keep their
 *    proportions), byte for byte, with fresh trace and span ids.
 * 4. Decode only: `decodeOtlpProtobuf` on the same bodies in this process (one core), spans/s.
 * 5. Overload: BENCH_OVERLOAD_CONCURRENCY requests in flight for BENCH_OVERLOAD_SECONDS against the default
 *    TAPEDECK_INGEST_MAX_INFLIGHT (8); clients resend at once after a 503 (no backoff: the harsh case).
 *    Reports the 503 share, whether every 503 carried Retry-After, accepted spans/s and the server's RSS
 *    (VmRSS, sampled every 500 ms).
 * 6. OTLP/gRPC beside OTLP/HTTP protobuf: the same exports sent by TraceService/Export (grpc-js client, the
 *    server's gRPC port) and by POST /v1/traces answered in protobuf, as exporters do, BENCH_GRPC_ROUNDS rounds of
 *    BENCH_GRPC_SECONDS each, the transports alternating; spans/s, p99 per export and server CPU per 1000 spans.
 * 7. Checks that every acknowledged span is stored, prints a markdown table, drops the database and stops
 *    the server (also on error or Ctrl-C).
 *
 * Knobs: BENCH_DATABASE_URL, BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_CONCURRENCY, BENCH_TRACES,
 * BENCH_SPANS_PER_TRACE, BENCH_DECODE_SECONDS, BENCH_OVERLOAD_SECONDS, BENCH_OVERLOAD_CONCURRENCY,
 * BENCH_JOB_DRAIN_SECONDS, BENCH_CEILING_ROWS, BENCH_GRPC_ROUNDS, BENCH_GRPC_SECONDS, BENCH_ANALYZE (default on: ANALYZE after the warm-up; "off" keeps a fresh database's
 * missing statistics), BENCH_CPU_PROF (a directory: the server runs under `bun --cpu-prof --cpu-prof-md`
 * and writes its profile there on exit).
 */
import { readFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import * as grpc from "@grpc/grpc-js"
import pg from "pg"
import { decodeOtlpProtobuf, otlpProtoRoot } from "#layers/ingest/OtlpDecode"
import { copyText } from "#layers/storage/PgCopy"
import { copyCeiling } from "./Copy.ts"
import {
  ANALYZE_AFTER_WARMUP,
  analyzeNote,
  commandLine,
  connect,
  cpuMeter,
  drainJobs,
  filler,
  freePort,
  fmtCores,
  fmtInt,
  fmtMs as fmtFiniteMs,
  fmtRatio,
  freshDatabase,
  KEY,
  latencyStats,
  log,
  mark,
  numberEnv,
  percentile,
  runBench,
  startServer,
  SYSTEM_PROMPT,
  tableLines
} from "./Harness.ts"

// ---------------------------------------------------------------------------------------------- settings

const SECONDS = numberEnv("BENCH_SECONDS", 20)
const WARMUP_SECONDS = numberEnv("BENCH_WARMUP_SECONDS", 3)
const CONCURRENCY = Math.floor(numberEnv("BENCH_CONCURRENCY", 8))
const TRACES = Math.floor(numberEnv("BENCH_TRACES", 100))
const SPANS_PER_TRACE = Math.floor(numberEnv("BENCH_SPANS_PER_TRACE", 20))
const DECODE_SECONDS = numberEnv("BENCH_DECODE_SECONDS", 3)
const OVERLOAD_SECONDS = numberEnv("BENCH_OVERLOAD_SECONDS", 10)
const OVERLOAD_CONCURRENCY = Math.floor(numberEnv("BENCH_OVERLOAD_CONCURRENCY", 32))
const JOB_DRAIN_SECONDS = numberEnv("BENCH_JOB_DRAIN_SECONDS", 30)
const GRPC_ROUNDS = Math.floor(numberEnv("BENCH_GRPC_ROUNDS", 3))
const GRPC_SECONDS = numberEnv("BENCH_GRPC_SECONDS", 5)
/** Rows the COPY ceiling writes (about as many as the API takes in 20 s). */
const CEILING_ROWS = Math.floor(numberEnv("BENCH_CEILING_ROWS", 200_000))

/** Spans per request (the server accepts at most 2000). */
const SPANS = TRACES * SPANS_PER_TRACE
/** The server's default TAPEDECK_INGEST_MAX_INFLIGHT, which this benchmark leaves unset. */
const DEFAULT_MAX_INFLIGHT = 8

const TARGET_SPANS_PER_SECOND = 40_000
const TARGET_COPY_RATIO = 0.6
/** OTLP/gRPC spans/s at least this share of OTLP/HTTP protobuf's. */
const TARGET_GRPC_RATIO = 0.9
/**
 * "Flat" memory under overload: its peak RSS stays within this factor of the peak under the step-1 load (RSS
 * swings with garbage collection under any load, so the RSS of an idle server is no baseline).
 */
const TARGET_RSS_GROWTH = 1.25
/** Cores busy outside the server, PostgreSQL and this client above which a phase is flagged as disturbed. */
const BUSY_OTHER_CORES = 0.25

const DATABASE_PREFIX = "tapedeck_bench_otlp_"

const KNOBS = [
  "BENCH_DATABASE_URL",
  "BENCH_SECONDS",
  "BENCH_WARMUP_SECONDS",
  "BENCH_CONCURRENCY",
  "BENCH_TRACES",
  "BENCH_SPANS_PER_TRACE",
  "BENCH_DECODE_SECONDS",
  "BENCH_OVERLOAD_SECONDS",
  "BENCH_OVERLOAD_CONCURRENCY",
  "BENCH_JOB_DRAIN_SECONDS",
  "BENCH_CEILING_ROWS",
  "BENCH_GRPC_ROUNDS",
  "BENCH_GRPC_SECONDS",
  "BENCH_ANALYZE",
  "BENCH_CPU_PROF"
]
const COMMAND = commandLine(KNOBS, "test/bench/otlp.ts")

// ---------------------------------------------------------------------------------------------- helpers

const fmtMs = (n: number) => (Number.isFinite(n) ? fmtFiniteMs(n) : "n/a")
const fmtPercent = (n: number) => (Number.isFinite(n) ? `${(n * 100).toFixed(1)} %` : "n/a")
const fmtMiB = (kib: number) => `${(kib / 1024).toFixed(0)} MiB`

// ---------------------------------------------------------------------------------------------- CPU and memory

/**
 * PostgreSQL CPU: every `postgres` process, plus what the postmaster's exited children used (its cutime + cstime):
 * backends that closed, parallel query workers and autovacuum workers that came and went are counted too.
 */
const CPU = cpuMeter("reaped")

/** Resident set size of a process in KiB (VmRSS in /proc/<pid>/status); NaN when unreadable. */
const rssKiB = (pid: number) => {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match ? Number(match[1]) : NaN
  } catch {
    return NaN
  }
}

// ---------------------------------------------------------------------------------------------- payloads

const randomBytes = (n: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(n)))

const SYSTEM = SYSTEM_PROMPT
const MODEL = "gpt-4.1-mini"

type AttrValue = string | number | boolean | ReadonlyArray<string>
/** KeyValues in protobufjs object form (int64 as numbers, which `fromObject` converts). */
const attrs = (record: Record<string, AttrValue>) =>
  Object.entries(record).map(([key, v]) => ({
    key,
    value: Array.isArray(v)
      ? { arrayValue: { values: v.map((s) => ({ stringValue: s })) } }
      : typeof v === "string"
        ? { stringValue: v }
        : typeof v === "boolean"
          ? { boolValue: v }
          : Number.isInteger(v)
            ? { intValue: v }
            : { doubleValue: v }
  }))

const MS_NS = 1_000_000n

/**
 * One trace of `SPANS_PER_TRACE` spans in protobufjs object form: a root `invoke_agent` span, then `chat`
 * and `execute_tool` children in turn, all children of the root. Content attributes are JSON strings, as
 * most SDKs send them: chat input ~460 B, chat output ~320–380 B, tool arguments ~110 B, tool result ~280 B.
 */
const makeTrace = (traceId: Buffer, startMs: number, t: number) => {
  const rootId = randomBytes(8)
  const ns = (ms: number) => String(BigInt(startMs + ms) * MS_NS)
  const step = 400
  const spans: Array<Record<string, unknown>> = [
    {
      traceId,
      spanId: rootId,
      name: "invoke_agent ResearchAgent",
      kind: 1,
      startTimeUnixNano: ns(0),
      endTimeUnixNano: ns(step * SPANS_PER_TRACE),
      attributes: attrs({
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "openai",
        "gen_ai.agent.id": "asst_research_01",
        "gen_ai.agent.name": "ResearchAgent",
        "gen_ai.conversation.id": `conv_${t}`,
        "gen_ai.request.model": MODEL
      }),
      status: {}
    }
  ]
  for (let i = 1; i < SPANS_PER_TRACE; i++) {
    const common = {
      traceId,
      spanId: randomBytes(8),
      parentSpanId: rootId,
      startTimeUnixNano: ns(i * step),
      endTimeUnixNano: ns(i * step + step - 20 - (i % 7) * 10),
      status: {}
    }
    if (i % 2 === 1) {
      const input = JSON.stringify([
        { role: "system", parts: [{ type: "text", content: SYSTEM }] },
        { role: "user", parts: [{ type: "text", content: filler(260) }] }
      ])
      const toolCall = i + 1 < SPANS_PER_TRACE
      const output = JSON.stringify([
        {
          role: "assistant",
          parts: toolCall
            ? [
                { type: "text", content: filler(160) },
                { type: "tool_call", id: `call_${t}_${i}`, name: "web_search", arguments: { query: filler(50) } }
              ]
            : [{ type: "text", content: filler(240) }],
          finish_reason: toolCall ? "tool_call" : "stop"
        }
      ])
      spans.push({
        ...common,
        name: `chat ${MODEL}`,
        kind: 3,
        attributes: attrs({
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": "openai",
          "gen_ai.request.model": MODEL,
          "gen_ai.response.model": `${MODEL}-2025-04-14`,
          "gen_ai.response.id": `chatcmpl-${t}-${i}`,
          "gen_ai.response.finish_reasons": [toolCall ? "tool_call" : "stop"],
          "gen_ai.usage.input_tokens": 300 + ((t * 7 + i * 13) % 900),
          "gen_ai.usage.output_tokens": 40 + ((t * 11 + i * 5) % 200),
          "server.address": "api.openai.com",
          "gen_ai.input.messages": input,
          "gen_ai.output.messages": output
        })
      })
    } else {
      spans.push({
        ...common,
        name: "execute_tool web_search",
        kind: 1,
        attributes: attrs({
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "web_search",
          "gen_ai.tool.call.id": `call_${t}_${i - 1}`,
          "gen_ai.tool.type": "function",
          "gen_ai.tool.call.arguments": JSON.stringify({ query: filler(90), top_k: 5 }),
          "gen_ai.tool.call.result": JSON.stringify({ results: [{ title: filler(40), snippet: filler(200) }] })
        })
      })
    }
  }
  return spans
}

const ExportRequest = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")
const ExportResponse = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse")

/**
 * An encoded request whose trace ids can be replaced: the body is built once with placeholder trace ids and
 * the byte offsets of every occurrence of each are kept, so a fresh request costs a copy and 16 random
 * bytes per trace (protobuf encoding 2000 spans per request would make the client compete for the CPU).
 */
interface BodyTemplate {
  readonly bytes: Uint8Array
  /** For each trace, the offsets of its 16-byte id. */
  readonly offsets: ReadonlyArray<ReadonlyArray<number>>
}

const makeTemplate = (startMs: number): BodyTemplate => {
  const ids = Array.from({ length: TRACES }, () => randomBytes(16))
  const spans = ids.flatMap((id, t) => makeTrace(id, startMs + t * 1000, t))
  const message = ExportRequest.fromObject({
    resourceSpans: [
      {
        resource: {
          attributes: attrs({
            "service.name": "research-agent",
            "service.version": "1.4.2",
            "deployment.environment.name": "production",
            "telemetry.sdk.language": "python",
            "telemetry.sdk.name": "opentelemetry",
            "telemetry.sdk.version": "1.37.0"
          })
        },
        scopeSpans: [{ scope: { name: "opentelemetry.instrumentation.openai_v2", version: "2.1b0" }, spans }]
      }
    ]
  })
  const bytes = ExportRequest.encode(message).finish()
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const offsets = ids.map((id) => {
    const found: Array<number> = []
    for (let at = buffer.indexOf(id); at !== -1; at = buffer.indexOf(id, at + 1)) found.push(at)
    if (found.length !== SPANS_PER_TRACE)
      throw new Error(`trace id found ${found.length} times, expected ${SPANS_PER_TRACE}`)
    return found
  })
  return { bytes, offsets }
}

let clock = Date.now() - 24 * 3600_000
const TEMPLATES = Array.from({ length: 4 }, () => makeTemplate((clock += TRACES * 1000)))
let nextTemplate = 0

/** A fresh request body: a template's bytes with new trace ids. */
const makeBody = (): Uint8Array => {
  const template = TEMPLATES[nextTemplate++ % TEMPLATES.length]!
  const body = Buffer.from(template.bytes)
  const ids = randomBytes(16 * template.offsets.length)
  template.offsets.forEach((offsets, t) => {
    for (const at of offsets) ids.copy(body, at, t * 16, t * 16 + 16)
  })
  return body
}

// ---------------------------------------------------------------------------------------------- COPY

/**
 * Rows as the API stored them, as COPY text: every column of the spans of `traces` whole traces (picked by
 * their random ids, so the span types come in the proportions the API stored them; `SELECT * FROM spans LIMIT n`
 * would return whatever the heap holds first) in PostgreSQL's own text output (no type parsing, so jsonb,
 * numeric and timestamptz go back exactly as they came out). Each batch gets fresh trace and span ids
 * (parents remapped within the batch); every other byte is kept.
 */
const SAMPLE_SQL = "SELECT * FROM spans WHERE trace_id IN (SELECT id FROM traces ORDER BY id LIMIT $1)"
const sampleRows = async (db: pg.Client, traces: number) => {
  const raw = (value: string) => value
  const result = await db.query<Array<string | null>>({
    text: SAMPLE_SQL,
    values: [traces],
    rowMode: "array",
    types: { getTypeParser: () => raw } as unknown as pg.CustomTypesConfig
  })
  const columns = result.fields.map((f) => f.name)
  const at = (name: string) => {
    const i = columns.indexOf(name)
    if (i < 0) throw new Error(`spans has no column ${name}`)
    return i
  }
  const traceCol = at("trace_id")
  const idCol = at("id")
  const parentCol = at("parent_id")
  const rows = result.rows.map((row) => row.map(copyText))
  const bytes = rows.reduce((n, r) => n + r.join("\t").length + 1, 0)
  const typeCol = at("span_type")
  const types = new Map<string, number>()
  for (const row of result.rows) types.set(String(row[typeCol]), (types.get(String(row[typeCol])) ?? 0) + 1)
  const mix = [...types]
    .sort((a, b) => b[1] - a[1])
    .map(([t, n]) => `${t} ${fmtInt(n)}`)
    .join(", ")
  const batch = () => {
    const traces = new Map<string, string>()
    const spans = new Map<string, string>()
    const fresh = (map: Map<string, string>, key: string) => {
      let id = map.get(key)
      if (id === undefined) map.set(key, (id = crypto.randomUUID()))
      return id
    }
    let out = ""
    for (const row of rows) {
      const copy = row.slice()
      const trace = row[traceCol]!
      copy[traceCol] = fresh(traces, trace)
      copy[idCol] = fresh(spans, `${trace}/${row[idCol]}`)
      if (row[parentCol] !== "\\N") copy[parentCol] = fresh(spans, `${trace}/${row[parentCol]}`)
      out += copy.join("\t") + "\n"
    }
    return out
  }
  return { columns, count: rows.length, avgBytes: bytes / Math.max(1, rows.length), mix, batch }
}

/** `totalRows` rows, `batchRows` per COPY, over `concurrency` connections. */
const copyCeilingOf = (
  databaseUrl: string,
  serverPid: number,
  sample: Awaited<ReturnType<typeof sampleRows>>,
  totalRows: number,
  concurrency: number
) =>
  copyCeiling({
    databaseUrl,
    serverPid,
    cpu: CPU,
    text: `COPY spans_copy (${sample.columns.join(", ")}) FROM STDIN`,
    batches: Math.max(1, Math.ceil(totalRows / sample.count)),
    concurrency,
    batch: sample.batch
  })

// ---------------------------------------------------------------------------------------------- phases

interface Load {
  readonly seconds: number
  /** Requests answered 200, the spans they acknowledged (`spans_ingested`) and the traces they created. */
  readonly accepted: number
  readonly spans: number
  readonly tracesCreated: number
  /** Spans refused through partialSuccess in 200 responses. */
  readonly rejectedSpans: number
  readonly latencies: Array<number>
  /** 503 answers, how many carried a valid Retry-After (integer seconds ≥ 1), and their latencies. */
  readonly unavailable: number
  readonly withRetryAfter: number
  readonly unavailableLatencies: Array<number>
  /** Any other status, or a failed request. */
  readonly errors: number
  readonly firstError?: string
  readonly bodyBytes: number
}

/**
 * How an export is sent: POST /v1/traces asking for the JSON result (its spans_ingested and traces_created are
 * counted), POST /v1/traces answered in protobuf as exporters read it, or OTLP/gRPC TraceService/Export. The
 * protobuf answers carry only the refused spans: the rest of the request counts as ingested, each trace created.
 */
type Transport = "http-json" | "http-protobuf" | { readonly grpcPort: number }

interface Answer {
  readonly status: number
  readonly retryAfter: boolean
  readonly result?: { rejectedSpans: number; errorMessage: string; spans: number; traces: number }
  readonly error?: string
}

const protobufResult = (bytes: Uint8Array) => {
  const decoded = ExportResponse.toObject(ExportResponse.decode(bytes), { longs: Number }) as {
    partialSuccess?: { rejectedSpans?: number; errorMessage?: string }
  }
  const rejectedSpans = decoded.partialSuccess?.rejectedSpans ?? 0
  return {
    rejectedSpans,
    errorMessage: decoded.partialSuccess?.errorMessage ?? "",
    spans: SPANS - rejectedSpans,
    traces: TRACES
  }
}

const identity = {
  requestSerialize: (b: Uint8Array) => Buffer.from(b),
  requestDeserialize: (b: Buffer) => b,
  responseSerialize: (b: Uint8Array) => Buffer.from(b),
  responseDeserialize: (b: Buffer) => b
}
const TraceServiceClient = grpc.makeGenericClientConstructor(
  {
    Export: {
      path: "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
      requestStream: false,
      responseStream: false,
      ...identity
    }
  },
  "TraceService"
)

/** One export sent; a gRPC UNAVAILABLE counts as the 503 it stands for (with RetryInfo as its Retry-After). */
const sender = (
  url: string,
  transport: Transport
): { send: (body: Uint8Array) => Promise<Answer>; close: () => void } => {
  if (typeof transport === "object") {
    const client = new TraceServiceClient(`127.0.0.1:${transport.grpcPort}`, grpc.credentials.createInsecure())
    const metadata = new grpc.Metadata()
    metadata.set("x-service-key", KEY)
    return {
      send: (body) =>
        new Promise((resolve) =>
          (client as any).Export(body, metadata, (error: grpc.ServiceError | null, response?: Buffer) => {
            if (error === null) return resolve({ status: 200, retryAfter: false, result: protobufResult(response!) })
            const unavailable = error.code === grpc.status.UNAVAILABLE
            resolve({
              status: unavailable ? 503 : 500,
              retryAfter: unavailable && error.metadata.get("grpc-status-details-bin").length > 0,
              error: `gRPC ${error.code}: ${error.details}`
            })
          })
        ),
      close: () => client.close()
    }
  }
  const json = transport === "http-json"
  return {
    send: async (body) => {
      const res = await fetch(`${url}/v1/traces`, {
        method: "POST",
        headers: {
          "content-type": "application/x-protobuf",
          "x-service-key": KEY,
          ...(json ? { accept: "application/json" } : {})
        },
        body
      })
      const bytes = new Uint8Array(await res.arrayBuffer())
      const retryAfter = /^[1-9]\d*$/.test(res.headers.get("retry-after") ?? "")
      if (res.status !== 200)
        return {
          status: res.status,
          retryAfter,
          error: `HTTP ${res.status}: ${new TextDecoder().decode(bytes).slice(0, 500)}`
        }
      if (!json) return { status: 200, retryAfter, result: protobufResult(bytes) }
      const result = JSON.parse(new TextDecoder().decode(bytes)) as {
        partialSuccess?: { rejectedSpans?: number | string; errorMessage?: string }
        traces_created: number
        spans_ingested: number
      }
      return {
        status: 200,
        retryAfter,
        result: {
          rejectedSpans: Number(result.partialSuccess?.rejectedSpans ?? 0),
          errorMessage: result.partialSuccess?.errorMessage ?? "",
          spans: result.spans_ingested,
          traces: result.traces_created
        }
      }
    },
    close: () => {}
  }
}

/** `concurrency` workers sending fresh protobuf exports until `seconds` have passed (no backoff after a 503). */
const load = async (
  url: string,
  seconds: number,
  concurrency: number,
  transport: Transport = "http-json"
): Promise<Load> => {
  const { send, close } = sender(url, transport)
  const latencies: Array<number> = []
  const unavailableLatencies: Array<number> = []
  let accepted = 0
  let spans = 0
  let tracesCreated = 0
  let rejectedSpans = 0
  let unavailable = 0
  let withRetryAfter = 0
  let errors = 0
  let firstError: string | undefined
  let bodyBytes = 0
  const start = performance.now()
  const end = start + seconds * 1000
  const worker = async () => {
    while (performance.now() < end) {
      const body = makeBody()
      const t0 = performance.now()
      try {
        const answer = await send(body)
        const t1 = performance.now()
        if (answer.result !== undefined) {
          accepted++
          spans += answer.result.spans
          tracesCreated += answer.result.traces
          if (answer.result.rejectedSpans > 0) {
            rejectedSpans += answer.result.rejectedSpans
            firstError ??= `partialSuccess: ${answer.result.errorMessage}`
          }
          bodyBytes += body.length
          latencies.push(t1 - t0)
        } else if (answer.status === 503) {
          unavailable++
          if (answer.retryAfter) withRetryAfter++
          unavailableLatencies.push(t1 - t0)
        } else {
          errors++
          firstError ??= answer.error
        }
      } catch (e) {
        errors++
        firstError ??= String(e)
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  close()
  return {
    seconds: (performance.now() - start) / 1000,
    accepted,
    spans,
    tracesCreated,
    rejectedSpans,
    latencies,
    unavailable,
    withRetryAfter,
    unavailableLatencies,
    errors,
    bodyBytes,
    ...(firstError ? { firstError } : {})
  }
}

/** Jobs not finished yet (the terminal-trace jobs ingestion enqueues, run by the server's worker). */
/** decodeOtlpProtobuf on fresh bodies in this process (one core), for `seconds` after a warm-up. */
const decodeOnly = (seconds: number) => {
  const bodies = Array.from({ length: 8 }, makeBody)
  const run = (i: number) => {
    const decoded = decodeOtlpProtobuf(bodies[i % bodies.length]!)
    if (decoded._tag === "Left") throw new Error(`decodeOtlpProtobuf: ${decoded.left}`)
    if (decoded.right.spans.length !== SPANS || decoded.right.rejected.length !== 0) {
      throw new Error(
        `decodeOtlpProtobuf gave ${decoded.right.spans.length} spans (${decoded.right.rejected.length} rejected)`
      )
    }
  }
  for (let i = 0; i < 10; i++) run(i)
  const times: Array<number> = []
  const until = performance.now() + seconds * 1000
  while (performance.now() < until) {
    const t0 = performance.now()
    run(times.length)
    times.push(performance.now() - t0)
  }
  const total = times.reduce((a, b) => a + b, 0)
  times.sort((a, b) => a - b)
  return {
    runs: times.length,
    median: percentile(times, 0.5),
    best: times[0]!,
    spansPerSecond: (times.length * SPANS) / (total / 1000)
  }
}

/** `load` while sampling the server's RSS (KiB) every 500 ms, from its start to its end. */
const loadWithRss = async (url: string, serverPid: number, seconds: number, concurrency: number) => {
  const rss: Array<number> = [rssKiB(serverPid)]
  const timer = setInterval(() => rss.push(rssKiB(serverPid)), 500)
  try {
    const result = await load(url, seconds, concurrency)
    rss.push(rssKiB(serverPid))
    return { ...result, rss: rss.filter(Number.isFinite) }
  } finally {
    clearInterval(timer)
  }
}

// ---------------------------------------------------------------------------------------------- main

const main = async () => {
  if (SPANS > 2000)
    throw new Error(`BENCH_TRACES × BENCH_SPANS_PER_TRACE = ${SPANS}: the server takes at most 2000 spans a request`)
  const { database, databaseUrl, pgVersion, autovacuum } = await freshDatabase(DATABASE_PREFIX)

  log(`database ${database}; starting the server`)
  // TAPEDECK_INGEST_MAX_INFLIGHT stays at its default (8) unless given: the overload phase measures that gate.
  const grpcPort = freePort()
  const server = await startServer(databaseUrl, {
    tailChars: 8000,
    extraEnv: { TAPEDECK_OTLP_GRPC_PORT: String(grpcPort) }
  })
  const db = await connect(databaseUrl)

  const bodyKiB = TEMPLATES.reduce((n, t) => n + t.bytes.length, 0) / TEMPLATES.length / 1024
  const phase = `POST /v1/traces (protobuf, ${TRACES} traces × ${SPANS_PER_TRACE} spans = ${SPANS} spans, ~${bodyKiB.toFixed(0)} KiB)`

  log(`warm-up: ${WARMUP_SECONDS} s of ${phase} at concurrency ${CONCURRENCY}`)
  const warm = await load(server.url, WARMUP_SECONDS, CONCURRENCY)
  if (warm.errors > 0 || warm.rejectedSpans > 0 || warm.accepted === 0) {
    throw new Error(`warm-up failed: ${warm.firstError ?? "no request accepted"}\nserver output:\n${server.output()}`)
  }
  const jobsBeforeIngest = (await drainJobs(db, JOB_DRAIN_SECONDS)).left
  if (ANALYZE_AFTER_WARMUP) await db.query("ANALYZE")
  await db.query("CHECKPOINT")

  // The ceiling runs on the quiet service (the warm-up's jobs done), before the ingest: the server's background
  // work would otherwise share the machine with it and lower it by a varying amount.
  const sample = await sampleRows(db, TRACES)
  await db.query("CREATE TABLE spans_copy (LIKE spans INCLUDING ALL)")
  await db.query("CHECKPOINT")
  log(
    `ceiling: COPY of ${fmtInt(CEILING_ROWS)} rows (sampled from spans) into spans_copy, ${sample.count} a batch over ${CONCURRENCY} connections`
  )
  const copy = await copyCeilingOf(databaseUrl, server.pid, sample, CEILING_ROWS, CONCURRENCY)
  const copySpansPerSecond = copy.rows / copy.seconds
  const copyLatency = latencyStats(copy.latencies)

  await db.query("CHECKPOINT")
  log(`ingest: ${SECONDS} s of ${phase} at concurrency ${CONCURRENCY}`)
  const ingestCpu0 = CPU.snapshot(server.pid)
  const api = await loadWithRss(server.url, server.pid, SECONDS, CONCURRENCY)
  const ingestCpu = CPU.busy(ingestCpu0, CPU.snapshot(server.pid))
  if (api.errors > 0 || api.rejectedSpans > 0) {
    throw new Error(
      `${api.errors} POSTs failed, ${api.rejectedSpans} spans rejected: ${api.firstError}\nserver output:\n${server.output()}`
    )
  }
  if (api.accepted === 0) throw new Error(`no request was accepted (${api.unavailable} answered 503)`)
  const apiSpansPerSecond = api.spans / api.seconds
  const apiLatency = latencyStats(api.latencies)

  const jobs = await drainJobs(db, JOB_DRAIN_SECONDS)
  log(`job queue: ${jobs.before} pending after ingest, ${jobs.left} after ${jobs.seconds.toFixed(1)} s`)

  log(`decode only: decodeOtlpProtobuf in-process for ${DECODE_SECONDS} s`)
  const decode = decodeOnly(DECODE_SECONDS)

  await db.query("CHECKPOINT")
  log(
    `overload: ${OVERLOAD_SECONDS} s at concurrency ${OVERLOAD_CONCURRENCY} (TAPEDECK_INGEST_MAX_INFLIGHT default ${DEFAULT_MAX_INFLIGHT})`
  )
  const overloadCpu0 = CPU.snapshot(server.pid)
  const over = await loadWithRss(server.url, server.pid, OVERLOAD_SECONDS, OVERLOAD_CONCURRENCY)
  const overloadCpu = CPU.busy(overloadCpu0, CPU.snapshot(server.pid))
  if (over.rejectedSpans > 0) throw new Error(`overload: ${over.rejectedSpans} spans rejected: ${over.firstError}`)
  const overRequests = over.accepted + over.unavailable + over.errors
  const overSpansPerSecond = over.spans / over.seconds
  const overLatency = latencyStats(over.latencies)
  const over503Latency = latencyStats(over.unavailableLatencies)
  const rssStart = over.rss[0] ?? NaN
  const rssPeak = Math.max(...over.rss)
  const rssEnd = over.rss.at(-1) ?? NaN

  // The same exports by both transports in turn, so that a change in the machine's load hits both alike.
  const jobsBeforeTransports = await drainJobs(db, JOB_DRAIN_SECONDS)
  log(
    `OTLP/gRPC beside OTLP/HTTP protobuf: ${GRPC_ROUNDS} rounds of ${GRPC_SECONDS} s each at concurrency ${CONCURRENCY} (${jobsBeforeTransports.left} jobs pending)`
  )
  const transports = {
    http: [] as Array<Load & { cpuSeconds: number }>,
    grpc: [] as Array<Load & { cpuSeconds: number }>
  }
  for (let round = 0; round < GRPC_ROUNDS; round++) {
    for (const [name, transport] of (round % 2 === 0
      ? [
          ["http", "http-protobuf"],
          ["grpc", { grpcPort }]
        ]
      : [
          ["grpc", { grpcPort }],
          ["http", "http-protobuf"]
        ]) as Array<["http" | "grpc", Transport]>) {
      const cpu0 = CPU.snapshot(server.pid)
      const result = await load(server.url, GRPC_SECONDS, CONCURRENCY, transport)
      const cpuSeconds = CPU.busy(cpu0, CPU.snapshot(server.pid)).serverSeconds
      if (result.errors > 0 || result.rejectedSpans > 0 || result.accepted === 0) {
        throw new Error(
          `${name}: ${result.errors} failed, ${result.rejectedSpans} spans rejected: ${result.firstError}\nserver output:\n${server.output()}`
        )
      }
      transports[name].push({ ...result, cpuSeconds })
    }
  }
  const summary = (runs: ReadonlyArray<Load & { cpuSeconds: number }>) => {
    const spans = runs.reduce((n, r) => n + r.spans, 0)
    return {
      spans,
      traces: runs.reduce((n, r) => n + r.tracesCreated, 0),
      spansPerSecond: spans / runs.reduce((n, r) => n + r.seconds, 0),
      latency: latencyStats(runs.flatMap((r) => r.latencies)),
      unavailable: runs.reduce((n, r) => n + r.unavailable, 0),
      cpuMsPerKSpans: (runs.reduce((n, r) => n + r.cpuSeconds, 0) / spans) * 1e6
    }
  }
  const viaHttp = summary(transports.http)
  const viaGrpc = summary(transports.grpc)
  const grpcRatio = viaGrpc.spansPerSecond / viaHttp.spansPerSecond

  // Everything the API acknowledged is stored.
  const stored = (
    await db.query<{ traces: string; spans: string; api_row: string; copy_row: string }>(
      `SELECT (SELECT count(*) FROM traces) AS traces, (SELECT count(*) FROM spans) AS spans,
            (SELECT avg(pg_column_size(s.*))::int FROM spans s) AS api_row,
            (SELECT avg(pg_column_size(s.*))::int FROM spans_copy s) AS copy_row`
    )
  ).rows[0]!
  const expectedTraces = warm.tracesCreated + api.tracesCreated + over.tracesCreated + viaHttp.traces + viaGrpc.traces
  const expectedSpans = warm.spans + api.spans + over.spans + viaHttp.spans + viaGrpc.spans
  if (Number(stored.traces) !== expectedTraces || Number(stored.spans) !== expectedSpans) {
    throw new Error(
      `stored ${stored.traces} traces / ${stored.spans} spans, expected ${expectedTraces} / ${expectedSpans}`
    )
  }

  const spansRatio = apiSpansPerSecond / copySpansPerSecond
  const allRetryAfter = over.withRetryAfter === over.unavailable
  const ingestRssPeak = Math.max(...api.rss)
  const rssGrowth = rssPeak / ingestRssPeak
  const serverMsPerKSpans = (ingestCpu.serverSeconds / api.spans) * 1e6
  const decodeMsPerKSpans = 1e6 / decode.spansPerSecond
  const rows: Array<[string, string, string, string, string]> = [
    [
      `POST /v1/traces spans/s (protobuf, ${SPANS} spans/request, concurrency ${CONCURRENCY})`,
      `${fmtInt(apiSpansPerSecond)} spans/s`,
      `≥ ${fmtInt(TARGET_SPANS_PER_SECOND)} spans/s${mark(apiSpansPerSecond >= TARGET_SPANS_PER_SECOND)}`,
      `${fmtInt(copySpansPerSecond)} spans/s (COPY)`,
      fmtRatio(spansRatio)
    ],
    [
      "API ÷ COPY spans/s",
      fmtRatio(spansRatio),
      `≥ ${TARGET_COPY_RATIO}${mark(spansRatio >= TARGET_COPY_RATIO)}`,
      "—",
      fmtRatio(spansRatio)
    ],
    [
      "POST /v1/traces latency p50",
      fmtMs(apiLatency.p50),
      "—",
      `${fmtMs(copyLatency.p50)} (COPY of ${sample.count} rows)`,
      fmtRatio(copyLatency.p50 / apiLatency.p50)
    ],
    [
      "POST /v1/traces latency p99",
      fmtMs(apiLatency.p99),
      "—",
      `${fmtMs(copyLatency.p99)} (COPY of ${sample.count} rows)`,
      fmtRatio(copyLatency.p99 / apiLatency.p99)
    ],
    [
      "POST /v1/traces 503s at concurrency " + CONCURRENCY,
      `${fmtInt(api.unavailable)} of ${fmtInt(api.accepted + api.unavailable)}`,
      "—",
      "—",
      "—"
    ],
    [
      "decodeOtlpProtobuf only (same bodies, in-process, 1 core)",
      `${fmtInt(decode.spansPerSecond)} spans/s`,
      "—",
      "—",
      `${fmtRatio(apiSpansPerSecond / decode.spansPerSecond)} (API ÷ decode)`
    ],
    [
      `Overload (concurrency ${OVERLOAD_CONCURRENCY}, max in flight ${DEFAULT_MAX_INFLIGHT}): 503 share`,
      `${fmtPercent(over.unavailable / overRequests)} (${fmtInt(over.unavailable)} of ${fmtInt(overRequests)})`,
      "—",
      "—",
      "—"
    ],
    [
      "Overload: 503s with Retry-After",
      `${fmtInt(over.withRetryAfter)} of ${fmtInt(over.unavailable)}`,
      `all${mark(allRetryAfter)}`,
      "—",
      "—"
    ],
    [
      "Overload: accepted spans/s",
      `${fmtInt(overSpansPerSecond)} spans/s`,
      "—",
      `${fmtInt(apiSpansPerSecond)} spans/s (concurrency ${CONCURRENCY})`,
      fmtRatio(overSpansPerSecond / apiSpansPerSecond)
    ],
    [
      "Overload: latency p50 / p99 (200s; 503s)",
      `${fmtMs(overLatency.p50)} / ${fmtMs(overLatency.p99)}; ${fmtMs(over503Latency.p50)} / ${fmtMs(over503Latency.p99)}`,
      "—",
      `${fmtMs(apiLatency.p50)} / ${fmtMs(apiLatency.p99)} (concurrency ${CONCURRENCY})`,
      fmtRatio(apiLatency.p50 / overLatency.p50)
    ],
    [
      "Overload: server RSS start / peak / end",
      `${fmtMiB(rssStart)} / ${fmtMiB(rssPeak)} / ${fmtMiB(rssEnd)}`,
      `flat: peak ≤ ${TARGET_RSS_GROWTH} × step-1 peak${mark(rssGrowth <= TARGET_RSS_GROWTH)}`,
      `${fmtMiB(ingestRssPeak)} (step-1 peak, concurrency ${CONCURRENCY})`,
      `${fmtRatio(rssGrowth)} (peak ÷ step-1 peak)`
    ],
    [
      `OTLP/gRPC Export spans/s (same exports, ${GRPC_ROUNDS} alternating rounds)`,
      `${fmtInt(viaGrpc.spansPerSecond)} spans/s`,
      `≥ ${TARGET_GRPC_RATIO} × HTTP${mark(grpcRatio >= TARGET_GRPC_RATIO)}`,
      `${fmtInt(viaHttp.spansPerSecond)} spans/s (POST /v1/traces, protobuf answer)`,
      fmtRatio(grpcRatio)
    ],
    [
      "OTLP/gRPC p99 per export; server CPU per 1000 spans",
      `${fmtMs(viaGrpc.latency.p99)}; ${viaGrpc.cpuMsPerKSpans.toFixed(1)} ms`,
      "—",
      `${fmtMs(viaHttp.latency.p99)}; ${viaHttp.cpuMsPerKSpans.toFixed(1)} ms (HTTP protobuf)`,
      fmtRatio(viaHttp.latency.p99 / viaGrpc.latency.p99)
    ]
  ]

  const cores = availableParallelism()
  /** Phases where processes other than the server, PostgreSQL and this client used a noticeable share. */
  const busy = (
    [
      ["ingest", ingestCpu],
      ["COPY", copy.cpu],
      ["overload", overloadCpu]
    ] as const
  )
    .filter(([, c]) => c.other > BUSY_OTHER_CORES)
    .map(([name, c]) => `${c.other.toFixed(2)} during ${name}`)
  const lines = [
    ...tableLines(["metric", "value", "target", "ceiling", "ratio"], rows),
    "",
    `Command: \`${COMMAND}\``,
    "",
    `- Machine: ${cores} CPUs, Bun ${Bun.version}, PostgreSQL ${pgVersion} (autovacuum ${autovacuum}; ${analyzeNote}); server \`bun src/app/main.ts\` in its own process on a fresh database, TAPEDECK_INGEST_MAX_INFLIGHT at its default (${DEFAULT_MAX_INFLIGHT}); client and server share the machine.`,
    `- Ingest: ${fmtInt(api.accepted)} exports answered 200 (${fmtInt(api.spans)} spans acknowledged by \`spans_ingested\`, ${fmtInt(api.tracesCreated)} traces created, 0 refused) in ${api.seconds.toFixed(1)} s after a ${WARMUP_SECONDS} s warm-up; ${fmtInt(api.unavailable)} answered 503. Bodies ~${bodyKiB.toFixed(0)} KiB of protobuf: per trace one \`invoke_agent\` root, ${Math.ceil((SPANS_PER_TRACE - 1) / 2)} \`chat\` spans (tokens, input/output messages as JSON strings of ~460/~350 B) and ${Math.floor((SPANS_PER_TRACE - 1) / 2)} \`execute_tool\` spans (arguments/result JSON strings of ~110/~280 B); fresh trace ids every request. Every acknowledged span of every phase verified stored (${fmtInt(expectedSpans)} spans, ${fmtInt(expectedTraces)} traces).`,
    `- Jobs (a terminal-trace job per finished trace and a search-indexing job per export, run by the server's own worker): ${fmtInt(jobs.before)} pending when ingest ended, so the worker ran ~${fmtInt((jobsBeforeIngest + api.tracesCreated + api.accepted - jobs.before) / api.seconds)} a second during ingest against ${fmtInt((api.tracesCreated + api.accepted) / api.seconds)} enqueued; ${jobs.left === 0 ? `drained in ${jobs.seconds.toFixed(1)} s` : `${fmtInt(jobs.left)} still pending after ${jobs.seconds.toFixed(1)} s`}.`,
    `- Ceiling, measured before the ingest on the quiet service (${jobsBeforeIngest === 0 ? "the warm-up's jobs all run" : `${fmtInt(jobsBeforeIngest)} of the warm-up's jobs still pending`}): \`COPY spans_copy FROM STDIN\` (\`LIKE spans INCLUDING ALL\`: same primary key and index, no foreign key) of ${fmtInt(copy.rows)} rows, ${sample.count} a COPY over ${CONCURRENCY} connections, in ${copy.seconds.toFixed(1)} s. The rows are the stored spans of ${TRACES} whole traces (\`${SAMPLE_SQL.replace("$1", String(TRACES))}\`: ${sample.mix}), ~${Math.round(sample.avgBytes)} B of COPY text each, with fresh ids. Average stored row: ${stored.api_row} B via the API, ${stored.copy_row} B via COPY. The API also writes the traces (reading back the stored spans of traces that existed before the request, to finalize them), enqueues a job per finished trace and a search-indexing job per request, and its worker indexes every span for search meanwhile; COPY does none of that.`,
    `- Decode only: ${decode.runs} runs of \`decodeOtlpProtobuf\` on ${SPANS}-span bodies, median ${fmtMs(decode.median)}, best ${fmtMs(decode.best)}: ${decodeMsPerKSpans.toFixed(1)} ms of CPU per 1000 spans, against ${serverMsPerKSpans.toFixed(1)} ms of server CPU per 1000 spans ingested (${fmtPercent(decodeMsPerKSpans / serverMsPerKSpans)} of it).`,
    `- Overload: ${OVERLOAD_CONCURRENCY} clients for ${over.seconds.toFixed(1)} s, each resending at once after a 503 (no backoff); ${fmtInt(over.accepted)} exports accepted (${fmtInt(over.spans)} spans), ${fmtInt(over.unavailable)} answered 503, ${fmtInt(over.errors)} other failures${over.firstError ? ` (first: ${over.firstError.slice(0, 200)})` : ""}. Server RSS (VmRSS, MiB) every 500 ms under overload: ${over.rss.map((k) => (k / 1024).toFixed(0)).join(" ")}; under the step-1 load: ${api.rss.map((k) => (k / 1024).toFixed(0)).join(" ")}.`,
    `- CPU, average cores busy of ${cores} (server process / all postgres processes / this client / anything else): ` +
      `ingest ${fmtCores(ingestCpu)}; COPY ${fmtCores(copy.cpu)}; overload ${fmtCores(overloadCpu)}.`,
    `- OTLP/gRPC beside OTLP/HTTP protobuf: ${GRPC_ROUNDS} rounds of ${GRPC_SECONDS} s a transport, alternating, concurrency ${CONCURRENCY}, the same bodies; gRPC through a grpc-js client to TraceService/Export, HTTP answered in protobuf as exporters read it. ${fmtInt(viaGrpc.spans)} spans by gRPC (p50 ${fmtMs(viaGrpc.latency.p50)}, ${viaGrpc.unavailable} UNAVAILABLE), ${fmtInt(viaHttp.spans)} by HTTP (p50 ${fmtMs(viaHttp.latency.p50)}, ${viaHttp.unavailable} 503s).`,
    "- ratio: the fraction of the ceiling reached (throughput: value ÷ ceiling; latency: ceiling ÷ value).",
    ...(busy.length > 0
      ? [
          `- ⚠ Other processes kept the machine busy (${busy.join("; ")} of ${cores} cores not this benchmark's): the figures are depressed; rerun on a quiet machine.`
        ]
      : [])
  ]
  console.log(lines.join("\n"))
}

await runBench(main)
