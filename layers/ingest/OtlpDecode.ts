import { Either } from "effect"
import { Buffer } from "node:buffer"
import { isAbsolute, join } from "node:path"
import { fileURLToPath } from "node:url"
import protobuf from "protobufjs"
import type { DecodedExport, OtlpEvent, OtlpSpan, RejectedSpan } from "#src/domain/Otlp"

const PROTO_DIR = fileURLToPath(new URL("./proto/", import.meta.url))

const loadRoot = () => {
  const root = new protobuf.Root()
  // Imports name paths from the proto root ("opentelemetry/proto/…"), not relative to the importing file;
  // google/protobuf/* are the well-known types protobufjs carries itself.
  root.resolvePath = (_origin, target) =>
    isAbsolute(target) || target.startsWith("google/protobuf/") ? target : join(PROTO_DIR, target)
  return root.loadSync([
    join(PROTO_DIR, "opentelemetry/proto/collector/trace/v1/trace_service.proto"),
    join(PROTO_DIR, "google/rpc/status.proto")
  ])
}

/**
 * The official OTLP definitions, loaded once: ExportTraceServiceRequest/Response and everything they use, and
 * google.rpc.Status (the body of an OTLP/HTTP error answered in protobuf).
 */
export const otlpProtoRoot = loadRoot()

const ExportRequest = otlpProtoRoot.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest")

/** Deeper AnyValues (arrays and kvlists inside each other) are replaced by `TOO_DEEP`. */
export const MAX_ANY_VALUE_DEPTH = 64
export const TOO_DEEP = "[nested too deep]"

// One walker serves both encodings: parsed OTLP/JSON (plain objects, ids as strings, int64 as strings or
// numbers) and decoded protobuf messages (ids as Buffers, int64 as Long; unset fields read their defaults
// from the message prototype, so only set oneof members are own properties).
type Obj = Record<string, unknown>

const NO_ITEMS: ReadonlyArray<unknown> = []
const isObject = (u: unknown): u is Obj => typeof u === "object" && u !== null && !Array.isArray(u)
const items = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : NO_ITEMS)
const text = (u: unknown) => (typeof u === "string" ? u : "")
const absent = (u: unknown) => u === undefined || u === null
const has = (u: Obj, key: string) => Object.hasOwn(u, key) && !absent(u[key])

/** Sets a key as an own property, "__proto__" included (plain assignment would swap the prototype). */
const put = (target: Obj, key: string, value: unknown) => {
  if (key === "__proto__")
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
  else target[key] = value
}

const Long = protobuf.util.Long
// instanceof, not Long.isLong: a JSON object can claim `__isLong__`, only protobufjs makes instances.
const isLong = (u: unknown): u is protobuf.Long => typeof Long === "function" && u instanceof Long

const TWO_32 = 4294967296

/**
 * An unsigned 64-bit integer (two uint32 halves) as an exact decimal string. Beyond 2^53 it is built from
 * two base-10^8 limbs held in safe doubles: cheaper than BigInt, and nanosecond timestamps always get here.
 */
const uint64Decimal = (high: number, low: number) => {
  const value = high * TWO_32 + low
  if (value <= Number.MAX_SAFE_INTEGER) return String(value)
  const high1 = high >>> 16
  const high0 = high & 0xffff
  // 2^48 = 2814749·10^8 + 76710656 and 2^32 = 42·10^8 + 94967296
  const lowLimb = high1 * 76710656 + high0 * 94967296 + low
  const carry = Math.floor(lowLimb / 1e8)
  const rest = lowLimb - carry * 1e8
  return `${high1 * 2814749 + high0 * 42 + carry}${String(rest + 1e8).slice(1)}`
}

/** A protobufjs Long as an exact decimal string (signed unless `unsigned`). */
const longDecimal = (l: protobuf.Long, unsigned: boolean) => {
  if (unsigned || l.high >= 0) return uint64Decimal(l.high >>> 0, l.low >>> 0)
  const value = l.high * TWO_32 + (l.low >>> 0)
  return Number.isSafeInteger(value) ? String(value) : ((BigInt(l.high) << 32n) + BigInt(l.low >>> 0)).toString()
}

const HEX = /^[0-9a-fA-F]+$/
const ZEROS = /^0+$/
const BASE64_ID: Record<number, RegExp> = { 16: /^[A-Za-z0-9+/]{22}==$/, 8: /^[A-Za-z0-9+/]{11}=$/ }

const asBuffer = (bytes: Uint8Array) =>
  Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
const toBase64 = (bytes: Uint8Array) => asBuffer(bytes).toString("base64")
const toHex = (bytes: Uint8Array) => asBuffer(bytes).toString("hex")

/**
 * An id of `size` bytes as lowercase hex: OTLP/JSON hex (any case), the 24/12-character base64 some exporters
 * send, or raw protobuf bytes. Undefined for anything else, all-zero ids included.
 */
const idHex = (u: unknown, size: number): string | undefined => {
  let hex: string | undefined
  if (typeof u === "string") {
    if (u.length === size * 2 && HEX.test(u)) hex = u.toLowerCase()
    else if (BASE64_ID[size]!.test(u)) hex = Buffer.from(u, "base64").toString("hex")
  } else if (u instanceof Uint8Array && u.length === size) {
    hex = toHex(u)
  }
  return hex === undefined || ZEROS.test(hex) ? undefined : hex
}

const isBase64Id = (u: unknown, size: number) => typeof u === "string" && u.length !== size * 2
const isEmptyId = (u: unknown) => absent(u) || u === "" || (u instanceof Uint8Array && u.length === 0)

const U64_MAX = "18446744073709551615"
const DIGITS = /^\d+$/

/** Unix nanoseconds as a canonical decimal string; "0" for anything that is not an unsigned 64-bit integer. */
const nanos = (u: unknown): string => {
  if (typeof u === "string" && DIGITS.test(u)) {
    const digits = u.length > 1 && u[0] === "0" ? u.replace(/^0+(?=\d)/, "") : u
    return digits.length < 20 || (digits.length === 20 && digits <= U64_MAX) ? digits : "0"
  }
  if (isLong(u)) return longDecimal(u, true)
  if (typeof u === "number" && Number.isInteger(u) && u >= 0 && u < 2 ** 64) return BigInt(u).toString()
  return "0"
}

const SPAN_KINDS = new Map([
  ["SPAN_KIND_UNSPECIFIED", 0],
  ["SPAN_KIND_INTERNAL", 1],
  ["SPAN_KIND_SERVER", 2],
  ["SPAN_KIND_CLIENT", 3],
  ["SPAN_KIND_PRODUCER", 4],
  ["SPAN_KIND_CONSUMER", 5]
])
const STATUS_CODES = new Map([
  ["STATUS_CODE_UNSET", 0],
  ["STATUS_CODE_OK", 1],
  ["STATUS_CODE_ERROR", 2]
])

/** An unsigned integer up to `max`, given as a number or a decimal string; 0 otherwise. */
const uint = (u: unknown, max: number): number => {
  const n = typeof u === "string" && DIGITS.test(u) && u.length <= 10 ? Number(u) : u
  return typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= max ? n : 0
}

/** An enum as its number; OTLP/JSON senders must send integers, but the names are accepted leniently. */
const enumValue = (u: unknown, names: ReadonlyMap<string, number>) =>
  typeof u === "string" && names.has(u) ? names.get(u)! : uint(u, 0x7fffffff)

const INT = /^-?\d{1,20}$/

/** An int64 AnyValue: a number when it is a safe integer, else its decimal string. */
const intValue = (u: unknown): unknown => {
  if (isLong(u)) {
    const decimal = longDecimal(u, false)
    return decimal.length < 16 ? Number(decimal) : intValue(decimal)
  }
  if (typeof u === "number") {
    if (Number.isSafeInteger(u)) return u
    return Number.isInteger(u) ? BigInt(u).toString() : null
  }
  if (typeof u !== "string" || !INT.test(u)) return null
  const n = Number(u)
  return Number.isSafeInteger(n) ? n : BigInt(u).toString()
}

const NON_FINITE = new Set(["NaN", "Infinity", "-Infinity"])
const NUMBER = /^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/

/** A double AnyValue; NaN and ±Infinity stay the strings OTLP/JSON spells them with (JSON has no such numbers). */
const doubleValue = (u: unknown): unknown => {
  if (typeof u === "number") return Number.isFinite(u) ? u : String(u)
  if (typeof u !== "string") return null
  if (NON_FINITE.has(u)) return u
  const n = NUMBER.test(u) ? Number(u) : Number.NaN
  return Number.isFinite(n) ? n : null
}

const bytesValue = (u: unknown): unknown => (typeof u === "string" ? u : u instanceof Uint8Array ? toBase64(u) : null)

/** A decoded AnyValue (section 1.3 of the mapping): `{}` and anything malformed are null. */
const anyValue = (u: unknown, depth: number): unknown => {
  if (!isObject(u)) return null
  if (depth > MAX_ANY_VALUE_DEPTH) return TOO_DEEP
  if (has(u, "stringValue")) return typeof u.stringValue === "string" ? u.stringValue : null
  if (has(u, "boolValue")) return typeof u.boolValue === "boolean" ? u.boolValue : null
  if (has(u, "intValue")) return intValue(u.intValue)
  if (has(u, "doubleValue")) return doubleValue(u.doubleValue)
  if (has(u, "arrayValue")) {
    return isObject(u.arrayValue) ? items(u.arrayValue.values).map((v) => anyValue(v, depth + 1)) : null
  }
  if (has(u, "kvlistValue")) return isObject(u.kvlistValue) ? keyValues(u.kvlistValue.values, depth + 1) : null
  if (has(u, "bytesValue")) return bytesValue(u.bytesValue)
  return null
}

/** A KeyValue list as an object; a repeated key keeps its last value, entries without a string key are skipped. */
const keyValues = (list: unknown, depth: number): Record<string, unknown> => {
  const out: Obj = {}
  for (const entry of items(list)) {
    if (!isObject(entry)) continue
    const key = absent(entry.key) ? "" : entry.key
    if (typeof key === "string") put(out, key, anyValue(entry.value, depth))
  }
  return out
}

const attributes = (list: unknown) => keyValues(list, 1)

const events = (list: unknown): Array<OtlpEvent> => {
  const out: Array<OtlpEvent> = []
  for (const u of items(list)) {
    if (isObject(u))
      out.push({ name: text(u.name), timeUnixNano: nanos(u.timeUnixNano), attributes: attributes(u.attributes) })
  }
  return out
}

const status = (u: unknown) =>
  isObject(u) ? { code: enumValue(u.code, STATUS_CODES), message: text(u.message) } : { code: 0, message: "" }

type Scope = OtlpSpan["scope"]
type Resource = OtlpSpan["resource"]

const INVALID_TRACE_ID = "invalid traceId: must be 16 bytes (32 hex characters), not all zero"
const INVALID_SPAN_ID = "invalid spanId: must be 8 bytes (16 hex characters), not all zero"
const INVALID_PARENT_ID = "invalid parentSpanId: must be empty or 8 bytes (16 hex characters), not all zero"

const span = (u: unknown, resource: Resource, scope: Scope): OtlpSpan | RejectedSpan => {
  if (!isObject(u)) return { reason: "span is not an object" }
  const traceId = idHex(u.traceId, 16)
  if (traceId === undefined) return { reason: INVALID_TRACE_ID }
  const spanId = idHex(u.spanId, 8)
  if (spanId === undefined) return { reason: INVALID_SPAN_ID }
  const root = !Object.hasOwn(u, "parentSpanId") || isEmptyId(u.parentSpanId)
  const parentSpanId = root ? null : idHex(u.parentSpanId, 8)
  if (parentSpanId === undefined) return { reason: INVALID_PARENT_ID }
  const base64 = isBase64Id(u.traceId, 16) || isBase64Id(u.spanId, 8) || (!root && isBase64Id(u.parentSpanId, 8))
  return {
    traceId,
    spanId,
    parentSpanId,
    name: text(u.name),
    kind: enumValue(u.kind, SPAN_KINDS),
    startTimeUnixNano: nanos(u.startTimeUnixNano),
    endTimeUnixNano: nanos(u.endTimeUnixNano),
    attributes: attributes(u.attributes),
    events: events(u.events),
    status: status(u.status),
    flags: uint(u.flags, 0xffffffff),
    traceState: text(u.traceState),
    resource,
    scope,
    idEncoding: base64 ? "base64" : "hex"
  }
}

const scopeOf = (u: unknown): Scope =>
  isObject(u)
    ? { name: text(u.name), version: text(u.version), attributes: attributes(u.attributes) }
    : { name: "", version: "", attributes: {} }

/** Flattens resourceSpans → scopeSpans → spans in document order; malformed containers hold no spans. */
const decodeExport = (resourceSpans: ReadonlyArray<unknown>): DecodedExport => {
  const spans: Array<OtlpSpan> = []
  const rejected: Array<RejectedSpan> = []
  for (const rs of resourceSpans) {
    if (!isObject(rs)) continue
    const resource = attributes(isObject(rs.resource) ? rs.resource.attributes : undefined)
    for (const ss of items(rs.scopeSpans)) {
      if (!isObject(ss)) continue
      const scope = scopeOf(ss.scope)
      for (const raw of items(ss.spans)) {
        const decoded = span(raw, resource, scope)
        if ("reason" in decoded) rejected.push(decoded)
        else spans.push(decoded)
      }
    }
  }
  return { spans, rejected }
}

/**
 * An OTLP/JSON ExportTraceServiceRequest (already parsed), decoded. Never throws: malformed spans are
 * `rejected`, malformed fields take their defaults; Left only when there is no `resourceSpans` array.
 */
export const decodeOtlpJson = (body: unknown): Either.Either<DecodedExport, string> =>
  isObject(body) && Array.isArray(body.resourceSpans)
    ? Either.right(decodeExport(body.resourceSpans))
    : Either.left("an OTLP ExportTraceServiceRequest must be an object with a resourceSpans array")

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/**
 * Reads a proto3 string field (strict UTF-8, as protobufjs does) as one flat string. protobufjs builds short
 * strings a few characters at a time; attribute keys made that way cost more to use as object keys than to read.
 */
function readString(this: protobuf.Reader): string {
  const length = this.uint32()
  const start = this.pos
  const end = start + length
  if (end > this.len) throw RangeError(`index out of range: ${start} + ${length} > ${this.len}`)
  this.pos = end
  const buf = this.buf as Buffer
  for (let i = start; i < end; i++) {
    if (buf[i]! > 0x7f) return strictUtf8.decode(buf.subarray(start, end))
  }
  return buf.toString("latin1", start, end)
}

const readerOf = (bytes: Uint8Array) => {
  const reader = protobuf.Reader.create(asBuffer(bytes))
  reader.stringVerify = readString
  return reader
}

/**
 * A binary (proto3) ExportTraceServiceRequest, decoded to the same shape as `decodeOtlpJson` gives for the
 * equivalent JSON. Left for a body protobufjs cannot decode (truncated, garbage, invalid UTF-8, nested over
 * 100 levels).
 */
export const decodeOtlpProtobuf = (bytes: Uint8Array): Either.Either<DecodedExport, string> => {
  let request: Obj
  try {
    request = ExportRequest.decode(readerOf(bytes)) as unknown as Obj
  } catch (error) {
    return Either.left(error instanceof Error ? error.message : String(error))
  }
  return Either.right(decodeExport(items(request.resourceSpans)))
}
