/**
 * OTLP decode-only throughput (not a test file: run it with `bun test/bench/otlp-decode.ts`).
 *
 * Builds one ExportTraceServiceRequest of BENCH_SPANS GenAI-like spans (10 attributes each, two of them ~1 KB
 * message strings, one event), encodes it as protobuf (with the vendored .proto files) and as OTLP/JSON, then
 * times decodeOtlpProtobuf and JSON.parse + decodeOtlpJson, plain and behind gzip, for BENCH_SECONDS each.
 * Prints a markdown table of the median and best time per export and the spans/s they give on one core (the
 * best run is the least disturbed by other processes on a shared machine).
 */
import { availableParallelism } from "node:os"
import { gzipSync } from "node:zlib"
import { decompress } from "#layers/ingest/Decompress"
import { decodeOtlpJson, decodeOtlpProtobuf, otlpProtoRoot } from "#layers/ingest/OtlpDecode"

const SPANS = Number(process.env.BENCH_SPANS ?? 2000)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3)

const hex = (bytes: number, seed: number) =>
  Array.from({ length: bytes }, (_, i) => ((seed * 131 + i * 17 + 1) % 256).toString(16).padStart(2, "0")).join("")
const message = (role: string, i: number) =>
  JSON.stringify([{ role, parts: [{ type: "text", content: `message ${i} `.padEnd(1000, "lorem ipsum ") }] }])
const str = (key: string, value: string) => ({ key, value: { stringValue: value } })
const int = (key: string, value: number) => ({ key, value: { intValue: String(value) } })

const span = (i: number) => ({
  traceId: hex(16, Math.floor(i / 20) + 1),
  spanId: hex(8, i + 1),
  ...(i % 20 === 0 ? {} : { parentSpanId: hex(8, i - (i % 20) + 1) }),
  name: "chat gpt-4o",
  kind: 3,
  startTimeUnixNano: String(1787220000000000000n + BigInt(i) * 1_000_000n),
  endTimeUnixNano: String(1787220000000000000n + BigInt(i) * 1_000_000n + 800_000_000n),
  attributes: [
    str("gen_ai.operation.name", "chat"),
    str("gen_ai.provider.name", "openai"),
    str("gen_ai.request.model", "gpt-4o"),
    str("gen_ai.response.model", "gpt-4o-2024-08-06"),
    { key: "gen_ai.request.temperature", value: { doubleValue: 0.2 } },
    int("gen_ai.usage.input_tokens", 1200 + i),
    int("gen_ai.usage.output_tokens", 300 + i),
    { key: "gen_ai.response.finish_reasons", value: { arrayValue: { values: [{ stringValue: "stop" }] } } },
    str("gen_ai.input.messages", message("user", i)),
    str("gen_ai.output.messages", message("assistant", i))
  ],
  events: [
    { name: "gen_ai.choice", timeUnixNano: String(1787220000500000000n + BigInt(i)), attributes: [int("index", 0)] }
  ],
  status: { code: 1 }
})

const jsonBody = {
  resourceSpans: [
    {
      resource: { attributes: [str("service.name", "bench-agent"), str("telemetry.sdk.language", "python")] },
      scopeSpans: [
        {
          scope: { name: "opentelemetry.instrumentation.openai", version: "0.48.0" },
          spans: Array.from({ length: SPANS }, (_, i) => span(i))
        }
      ]
    }
  ]
}

// The protobuf form of the same request: hex ids become bytes, everything else converts as is.
const Request = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")
const withByteIds = JSON.parse(JSON.stringify(jsonBody), (key, value) =>
  ["traceId", "spanId", "parentSpanId"].includes(key) ? Buffer.from(value, "hex") : value
)
const protoBytes = Request.encode(Request.fromObject(withByteIds)).finish()
const jsonBytes = new TextEncoder().encode(JSON.stringify(jsonBody))
const protoGzip = gzipSync(protoBytes)
const jsonGzip = gzipSync(jsonBytes)
const LIMIT = 64 * 1024 * 1024

const mustBeRight = <A>(either: { _tag: "Left"; left: unknown } | { _tag: "Right"; right: A }): A => {
  if (either._tag === "Left") throw new Error(`decode failed: ${String(either.left)}`)
  return either.right
}
const fromJson = (bytes: Uint8Array) => mustBeRight(decodeOtlpJson(JSON.parse(new TextDecoder().decode(bytes))))
const unzip = (bytes: Uint8Array) => mustBeRight(decompress(bytes, "gzip", LIMIT))

const cases: ReadonlyArray<{ name: string; size: number; run: () => { spans: ReadonlyArray<unknown> } }> = [
  {
    name: "protobuf: decodeOtlpProtobuf",
    size: protoBytes.length,
    run: () => mustBeRight(decodeOtlpProtobuf(protoBytes))
  },
  { name: "JSON: JSON.parse + decodeOtlpJson", size: jsonBytes.length, run: () => fromJson(jsonBytes) },
  {
    name: "protobuf + gzip: decompress + decode",
    size: protoGzip.length,
    run: () => mustBeRight(decodeOtlpProtobuf(unzip(protoGzip)))
  },
  { name: "JSON + gzip: decompress + parse + decode", size: jsonGzip.length, run: () => fromJson(unzip(jsonGzip)) }
]

const measure = (run: () => { spans: ReadonlyArray<unknown> }) => {
  for (let i = 0; i < 5; i++) if (run().spans.length !== SPANS) throw new Error("wrong span count")
  const times: Array<number> = []
  const until = performance.now() + SECONDS * 1000
  while (performance.now() < until) {
    const start = performance.now()
    run()
    times.push(performance.now() - start)
  }
  times.sort((a, b) => a - b)
  return { median: times[Math.floor(times.length / 2)]!, best: times[0]!, runs: times.length }
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`
const rows = cases.map((c) => {
  const { best, median, runs } = measure(c.run)
  const rate = (ms: number) => Math.round((SPANS / ms) * 1000).toLocaleString("en-US")
  return `| ${c.name} | ${kb(c.size)} | ${median.toFixed(1)} | ${rate(median)} | ${best.toFixed(1)} | ${rate(best)} | ${runs} |`
})

console.log(
  `OTLP decode, ${SPANS} spans per export, Bun ${process.versions.bun}, one core of ${availableParallelism()}\n`
)
console.log("| Path | Body | ms / export (median) | spans/s (median) | ms (best) | spans/s (best) | runs |")
console.log("|---|---:|---:|---:|---:|---:|---:|")
for (const row of rows) console.log(row)
