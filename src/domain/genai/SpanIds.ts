/**
 * How one account's OTel ids become our UUIDs (docs/otel-mapping.md, "Ids"). The hashing is the caller's
 * (layers/ingest/OtlpIds.ts, on Bun's SHA-1): the mapping only says which id it needs, so it stays pure.
 */
export interface SpanIds {
  /** Our trace UUID for an OTel trace id (lowercase hex). */
  readonly trace: (traceHex: string) => string
  /** Our span UUID for an OTel span id within its trace (lowercase hex). */
  readonly span: (traceHex: string, spanHex: string) => string
  /** `parent_id`: the span UUID of a parent's OTel span id (lowercase hex). */
  readonly parent: (traceHex: string, parentHex: string) => string
  /** A project named by the sender: the same UUID for the same account and name, on every instance. */
  readonly project: (name: string) => string
}
