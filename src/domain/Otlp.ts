import { Schema } from "effect"
import { required } from "./Described.ts"

/**
 * One OTLP span after decoding (JSON or protobuf), flattened with its resource and scope. Attribute values
 * are decoded AnyValues (string, number, boolean, array, object, null; an int64 outside the safe range stays a
 * decimal string; bytes become base64). Ids are lowercase hex; times are decimal strings of Unix nanoseconds.
 */
export interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  /** null for a root span (empty or absent parentSpanId). */
  readonly parentSpanId: string | null
  readonly name: string
  readonly kind: number
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes: Readonly<Record<string, unknown>>
  readonly events: ReadonlyArray<OtlpEvent>
  readonly status: { readonly code: number; readonly message: string }
  readonly flags: number
  readonly traceState: string
  readonly resource: Readonly<Record<string, unknown>>
  readonly scope: {
    readonly name: string
    readonly version: string
    readonly attributes: Readonly<Record<string, unknown>>
  }
  /** "base64" when a non-compliant exporter sent base64 ids (converted to hex). */
  readonly idEncoding: "hex" | "base64"
}

export interface OtlpEvent {
  readonly name: string
  readonly timeUnixNano: string
  readonly attributes: Readonly<Record<string, unknown>>
}

/** A span the decoder refused (bad ids, …): counted in partialSuccess, the others still land. */
export interface RejectedSpan {
  readonly reason: string
}

/** A whole ExportTraceServiceRequest, decoded: spans in document order. */
export interface DecodedExport {
  readonly spans: ReadonlyArray<OtlpSpan>
  readonly rejected: ReadonlyArray<RejectedSpan>
}

/** POST /v1/traces JSON body (unknown fields are ignored, as OTLP requires). */
export const OtlpJsonRequest = Schema.Struct({
  resourceSpans: Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown })).pipe(Schema.maxItems(100))
}).annotations({ identifier: "ExportTraceServiceRequest" })

export const OtlpTraceResult = Schema.Struct({
  partialSuccess: required(
    Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    "OTLP's partial success: empty when every span was accepted, else rejectedSpans and an errorMessage"
  ),
  traces_created: required(Schema.Int.pipe(Schema.nonNegative()), "Traces this export created"),
  spans_ingested: required(Schema.Int.pipe(Schema.nonNegative()), "Spans this export recorded")
}).annotations({ identifier: "OtlpTraceResult" })
export type OtlpTraceResult = typeof OtlpTraceResult.Type
