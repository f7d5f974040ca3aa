import type { SpanIds } from "#src/domain/genai/SpanIds"
import { sha1Into } from "../platform/Hashes.ts"

/**
 * Deterministic UUIDs for OTLP traces and spans (docs/otel-mapping.md, "Ids"): account-scoped UUIDv5, so a
 * re-delivered batch maps to the same rows and the same W3C trace exported by two accounts never collides.
 */

/** RFC 9562 NAMESPACE_URL. */
const NAMESPACE_URL = "6ba7b811-9dad-11d1-80b4-00c04fd430c8"

/**
 * UUIDv5(NAMESPACE_URL, "urn:agent-tracing:otlp-ingest:v1"). Frozen: changing it re-keys every OTLP trace
 * already stored.
 */
export const ROOT_NS = "456acc4e-e8f0-5f9f-91cf-0315d3714dfe"

const HEX: ReadonlyArray<string> = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"))

// The namespace's 16 bytes followed by the name's UTF-8, hashed in one call: SHA-1 into a reused buffer
// costs about a third of a node:crypto Hash copied per name. The namespace bytes are rewritten only when it changes
// (a request maps all its spans under one account namespace).
let input = Buffer.allocUnsafe(256)
let inputNs = ""
const digest = new Uint8Array(20)

/** UUIDv5 (RFC 9562 §5.5) of a UTF-8 name in a namespace, lowercase 8-4-4-4-12. */
export const uuidV5 = (namespace: string, name: string): string => {
  if (16 + name.length * 3 > input.length) {
    input = Buffer.allocUnsafe(16 + name.length * 3)
    inputNs = ""
  }
  if (namespace !== inputNs) {
    input.write(namespace.replaceAll("-", ""), 0, 16, "hex")
    inputNs = namespace
  }
  const length = 16 + input.write(name, 16, "utf8")
  const h = sha1Into(input.subarray(0, length), digest)
  const b6 = (h[6]! & 0x0f) | 0x50
  const b8 = (h[8]! & 0x3f) | 0x80
  return (
    HEX[h[0]!]! + HEX[h[1]!]! + HEX[h[2]!]! + HEX[h[3]!]! + "-" +
    HEX[h[4]!]! + HEX[h[5]!]! + "-" +
    HEX[b6]! + HEX[h[7]!]! + "-" +
    HEX[b8]! + HEX[h[9]!]! + "-" +
    HEX[h[10]!]! + HEX[h[11]!]! + HEX[h[12]!]! + HEX[h[13]!]! + HEX[h[14]!]! + HEX[h[15]!]!
  )
}

/** The namespace of one account's OTLP ids; `accountId` must be the immutable account UUID. */
export const accountNamespace = (accountId: string): string => uuidV5(ROOT_NS, "account:" + accountId)

// Spans of one trace arrive together, so remembering the last trace id saves a hash per span.
let lastTraceNs = ""
let lastTraceHex = ""
let lastTraceUuid = ""

/** Our trace UUID for an OTel trace id (hex, any case). */
export const traceUuid = (accountNs: string, traceHex: string): string => {
  if (traceHex !== lastTraceHex || accountNs !== lastTraceNs) {
    lastTraceUuid = uuidV5(accountNs, "trace:" + traceHex.toLowerCase())
    lastTraceHex = traceHex
    lastTraceNs = accountNs
  }
  return lastTraceUuid
}

/** Our span UUID for an OTel span id within its trace (hex, any case). */
export const spanUuid = (accountNs: string, traceHex: string, spanHex: string): string =>
  uuidV5(accountNs, "span:" + traceHex.toLowerCase() + ":" + spanHex.toLowerCase())

// Siblings usually follow each other, so remembering the last parent saves a hash for most spans.
let lastParentNs = ""
let lastParentTrace = ""
let lastParentHex = ""
let lastParentUuid = ""

/** `parent_id`: the span UUID of a parent's OTel span id (hex, any case). */
export const parentUuid = (accountNs: string, traceHex: string, parentHex: string): string => {
  if (parentHex !== lastParentHex || traceHex !== lastParentTrace || accountNs !== lastParentNs) {
    lastParentUuid = spanUuid(accountNs, traceHex, parentHex)
    lastParentNs = accountNs
    lastParentTrace = traceHex
    lastParentHex = parentHex
  }
  return lastParentUuid
}

/** The mapping's ids (docs/otel-mapping.md, "Ids") for one account; `accountId` as for `accountNamespace`. */
export const accountSpanIds = (accountId: string): SpanIds => {
  const ns = accountNamespace(accountId)
  return {
    trace: (traceHex) => traceUuid(ns, traceHex),
    span: (traceHex, spanHex) => spanUuid(ns, traceHex, spanHex),
    parent: (traceHex, parentHex) => parentUuid(ns, traceHex, parentHex),
    project: (name) => uuidV5(ns, "project:" + name)
  }
}
