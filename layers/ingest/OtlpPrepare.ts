import { Either, Schema } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { type DecodedExport, OtlpJsonRequest } from "#src/domain/Otlp"
import { MAX_BODY_DEPTH, nestsDeeperThan } from "#src/domain/JsonDepth"
import { once, toRecord } from "../traces/SpanRecords.ts"
import { partHasher, splitPayload } from "../traces/PayloadSplit.ts"
import { packSkeleton, sentParts } from "../traces/PartPacking.ts"
import { DEFAULT_PRICES, type PriceTable } from "#src/domain/pricing/Prices"
import { CopyData, copyJson, copyText, copyTextArray } from "../storage/PgCopy.ts"
import { decompress } from "./Decompress.ts"
import { type MappedSpan, mapSpan } from "#src/domain/genai/MapSpan"
import { ExportMemo } from "#src/domain/genai/Reuse"
import { decodeOtlpJson, decodeOtlpProtobuf } from "./OtlpDecode.ts"
import { accountSpanIds } from "./OtlpIds.ts"
import { finalizeTrace, type StoredSpan, type TraceFinalization } from "#src/domain/genai/TraceFinalize"

/** At most this many spans are created per request; the rest are refused through partialSuccess. */
export const MAX_SPANS_PER_EXPORT = 2000

/**
 * Maps the decoded spans in document order, applying the cap; the spans to write and what was refused. `reuse`: no
 * extension sees the mapped spans, so a span may share (frozen) values with those mapped before it (ExportMemo).
 */
export const mapAll = (accountId: AccountId, decoded: DecodedExport, reuse: boolean) => {
  const ids = accountSpanIds(accountId)
  const memo = reuse ? new ExportMemo() : undefined
  const reasons = new Set(decoded.rejected.map((r) => r.reason))
  let rejected = decoded.rejected.length
  // The last copy of a span sent twice in one request wins, as it would across requests.
  const byKey = new Map<string, MappedSpan>()
  const kept = new Set<string>()
  for (const span of decoded.spans) {
    // The cap is applied before mapping: spans past it cost a count, not a mapping.
    const otelKey = `${span.traceId}/${span.spanId}`
    if (!kept.has(otelKey) && kept.size >= MAX_SPANS_PER_EXPORT) {
      rejected++
      reasons.add(`more than ${MAX_SPANS_PER_EXPORT} spans in one request: lower the exporter's batch size`)
      continue
    }
    kept.add(otelKey)
    let mapped: MappedSpan | undefined
    try {
      mapped = mapSpan(ids, span, memo)
    } catch {
      rejected++
      reasons.add("a span could not be mapped")
      continue
    }
    if (mapped === undefined) continue
    byKey.set(`${mapped.traceId}/${mapped.span.id}`, mapped)
  }
  return { spans: [...byKey.values()], rejected, reasons }
}

/** Where each trace of the spans starts: its earliest span's start, and its OTLP id. */
export const traceStarts = (spans: ReadonlyArray<MappedSpan>) => {
  const starts = new Map<string, { id: string; startedAt: string; otelTraceId: string }>()
  for (const m of spans) {
    const known = starts.get(m.traceId)
    if (!known || m.span.started_at < known.startedAt) {
      starts.set(m.traceId, { id: m.traceId, startedAt: m.span.started_at, otelTraceId: m.otelTraceId })
    }
  }
  return starts
}

/**
 * Finalizes one trace from its spans stored earlier and this request's (`fresh`, by span id): this request's spans
 * with their final agent fields, usage and estimated costs, the changes to earlier spans, and the trace's derived fields.
 */
export const finalizeWith = (
  earlier: ReadonlyArray<StoredSpan>,
  fresh: ReadonlyMap<string, MappedSpan>,
  prices: PriceTable
) => {
  const finalized = finalizeTrace([...earlier, ...[...fresh.values()].map((m) => m.span)], prices)
  const changed = new Map(finalized.spanUpdates.map((u) => [u.id, u]))
  const spans: Array<MappedSpan> = []
  for (const m of fresh.values()) {
    const update = changed.get(m.span.id)
    if (update === undefined) spans.push(m)
    else {
      const { id: _id, ...fields } = update
      spans.push({ ...m, span: { ...m.span, ...fields } })
    }
  }
  // A stored span's input and output are not rewritten: a payload taken from a step applies to spans of this request.
  const earlierUpdates = finalized.spanUpdates
    .filter((u) => !fresh.has(u.id))
    .flatMap(({ input: _i, output: _o, ...u }) => (Object.keys(u).length > 1 ? [u] : []))
  return { spans, earlierUpdates, trace: finalized.trace }
}

/** The spans of an export grouped by trace, then by span id, in first-seen order. */
export const byTrace = (spans: ReadonlyArray<MappedSpan>) => {
  const grouped = new Map<string, Map<string, MappedSpan>>()
  for (const m of spans) {
    const byId = grouped.get(m.traceId) ?? new Map<string, MappedSpan>()
    byId.set(m.span.id, m)
    grouped.set(m.traceId, byId)
  }
  return grouped
}

/**
 * The spans as COPY text rows (trace_id, account_id, then SPAN_WRITE_COLUMNS), holding what the upsert's records hold.
 * Each shared part's text goes in the first row that has it only; later rows send its hash alone (a NULL text), which
 * the split trigger finds stored by then, as COPY stores its rows in order. A model call repeats every earlier message
 * of its trace, so sending every row's parts whole sent, and escaped, each message once per later call. A part's text
 * is sent compressed when that pays (PartPacking.sentPart, stored as sent): for a large export this runs on the
 * preparing thread, so deflate costs the request thread nothing.
 */
export const spanCopyRows = (accountId: AccountId, spans: ReadonlyArray<MappedSpan>) => {
  const data = new CopyData(spans.length * 2048)
  const hash = partHasher()
  const sent = once()
  for (const m of spans) {
    const r = toRecord(m.span as never)
    const input = splitPayload(m.span.input, sent, hash)
    const output = splitPayload(m.span.output, sent, hash)
    data.addRow([
      m.traceId,
      accountId,
      r.id,
      copyText(r.parent_id),
      copyText(r.span_type),
      copyText(r.name),
      copyText(r.model),
      m.span.input === undefined || input !== undefined ? "\\N" : copyJson(m.span.input),
      m.span.output === undefined || output !== undefined ? "\\N" : copyJson(m.span.output),
      copyText(r.input_tokens),
      copyText(r.output_tokens),
      copyText(r.cost),
      copyText(r.duration_ms),
      copyText(r.metadata),
      copyText(r.agent_id),
      copyText(r.parent_agent_id),
      copyText(r.agent_role),
      copyText(r.started_at),
      copyText(r.ended_at),
      copyText(r.error),
      copyText(r.extra),
      copyText(input && packSkeleton(input.skel)),
      input === undefined ? "\\N" : copyTextArray(sentParts(input.parts)),
      input === undefined ? "\\N" : `{${input.hashes.join(",")}}`,
      copyText(output && packSkeleton(output.skel)),
      output === undefined ? "\\N" : copyTextArray(sentParts(output.parts)),
      output === undefined ? "\\N" : `{${output.hashes.join(",")}}`,
      "\\N",
      "\\N"
    ])
  }
  return data
}

/** SPAN_TOTALS of a new trace's spans, computed before they are stored (see OtlpStore.createFinalAndLock). */
export interface PreparedTotals {
  readonly count: number
  /** Σ input + output tokens, capped at 2^53 − 1, as decimal text. */
  readonly tokens: string
  /** Each span's cost as COPY writes it (summed as numeric in SQL: exact). */
  readonly costs: ReadonlyArray<string>
  /** The latest of each span's end (or start + duration, or start), ISO 8601. */
  readonly lastEnd: string
  /** The models the spans name (distinct; sorted by the insert, as SQL sorts them). */
  readonly models: ReadonlyArray<string>
  /** Whether a span recorded an error (an `error`, or type `error`). */
  readonly hasError: boolean
}

/** A trace of a prepared export, written as new: where it starts and what its finalization derived. */
export interface PreparedTrace {
  readonly id: string
  readonly startedAt: string
  readonly otelTraceId: string
  readonly trace: TraceFinalization["trace"]
  readonly spanIds: ReadonlyArray<string>
  readonly totals: PreparedTotals
}

const MAX_TOKENS = 9007199254740991n
/** The instants `toISOString` writes with a four-digit year PostgreSQL reads: years 0001 to 9999. */
const FIRST_ISO_MS = -62135596800000
const LAST_ISO_MS = 253402300799999

/** The totals of spans; throws on what it cannot compute exactly (the export is then written the general way). */
const totalsOf = (spans: ReadonlyArray<MappedSpan>): PreparedTotals => {
  let tokens = 0n
  let lastEnd = Number.NEGATIVE_INFINITY
  const costs: Array<string> = []
  const models = new Set<string>()
  let hasError = false
  for (const { span } of spans) {
    if (span.model !== undefined) models.add(span.model)
    if (span.error !== undefined || span.span_type === "error") hasError = true
    tokens += BigInt(span.input_tokens ?? 0) + BigInt(span.output_tokens ?? 0)
    if (span.cost !== undefined) costs.push(String(span.cost))
    const start = Date.parse(span.started_at)
    const end =
      span.ended_at !== undefined
        ? Date.parse(span.ended_at)
        : span.duration_ms !== undefined
          ? start + span.duration_ms
          : start
    if (end > lastEnd) lastEnd = end
  }
  if (!(lastEnd >= FIRST_ISO_MS && lastEnd <= LAST_ISO_MS)) throw new RangeError("span end out of range")
  return {
    count: spans.length,
    tokens: String(tokens > MAX_TOKENS ? MAX_TOKENS : tokens),
    costs,
    lastEnd: new Date(lastEnd).toISOString(),
    models: [...models],
    hasError
  }
}

/**
 * An export mapped, finalized and encoded for traces it creates (the usual case: an exporter sends each trace's
 * spans once). Only plain data and one byte array, so it crosses threads; `copy` is the CopyData message of every span.
 */
export interface PreparedExport {
  readonly rejected: number
  readonly reasons: ReadonlyArray<string>
  readonly spanCount: number
  readonly traces: ReadonlyArray<PreparedTrace>
  readonly copy: Uint8Array
}

/**
 * Prepares an export on the assumption that every trace in it is new (the writer checks, and starts over if not),
 * estimating missing costs from `prices` (the server's table, which the preparing thread is sent).
 */
export const prepareExport = (
  accountId: AccountId,
  decoded: DecodedExport,
  prices: PriceTable = DEFAULT_PRICES
): PreparedExport => {
  const { reasons, rejected, spans } = mapAll(accountId, decoded, true)
  const starts = traceStarts(spans)
  const traces: Array<PreparedTrace> = []
  const finalSpans: Array<MappedSpan> = []
  for (const [id, fresh] of byTrace(spans)) {
    const finalized = finalizeWith([], fresh, prices)
    finalSpans.push(...finalized.spans)
    const start = starts.get(id)!
    traces.push({ ...start, trace: finalized.trace, spanIds: [...fresh.keys()], totals: totalsOf(finalized.spans) })
  }
  return {
    rejected,
    reasons: [...reasons],
    spanCount: spans.length,
    traces,
    copy: spanCopyRows(accountId, finalSpans).message()
  }
}

/** A protobuf body as sent (before its Content-Encoding) decoded, or why it is refused (the 400's message). */
export const decodeProtobufBody = (
  raw: Uint8Array,
  contentEncoding: string | undefined,
  maxDecompressedBytes: number
): Either.Either<DecodedExport, string> =>
  decodeDecompressed(raw, contentEncoding, maxDecompressedBytes, (bytes) =>
    Either.mapLeft(decodeOtlpProtobuf(bytes), (message) => `not an OTLP protobuf ExportTraceServiceRequest: ${message}`)
  )

/** A body as sent decompressed (by its Content-Encoding, within the limit), then decoded by `decode`. */
const decodeDecompressed = (
  raw: Uint8Array,
  contentEncoding: string | undefined,
  maxDecompressedBytes: number,
  decode: (bytes: Uint8Array) => Either.Either<DecodedExport, string>
): Either.Either<DecodedExport, string> =>
  Either.flatMap(
    Either.mapLeft(decompress(raw, contentEncoding, maxDecompressedBytes), (e) => e.message),
    decode
  )

const decodeOtlpJsonShape = Schema.decodeUnknownEither(OtlpJsonRequest)

/** A JSON body, already decompressed, decoded; or why it is refused (the 400's message). */
export const decodeJsonBytes = (bytes: Uint8Array): Either.Either<DecodedExport, string> => {
  let body: unknown
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
  } catch {
    return Either.left("request body is not valid JSON")
  }
  if (nestsDeeperThan(body, MAX_BODY_DEPTH))
    return Either.left(`request body nests deeper than ${MAX_BODY_DEPTH} levels`)
  if (Either.isLeft(decodeOtlpJsonShape(body))) {
    return Either.left("not an OTLP ExportTraceServiceRequest: resourceSpans must be an array of at most 100 objects")
  }
  return decodeOtlpJson(body)
}

/** An OTLP/JSON body as sent (before its Content-Encoding) decoded, or why it is refused (the 400's message). */
export const decodeJsonBody = (
  raw: Uint8Array,
  contentEncoding: string | undefined,
  maxDecompressedBytes: number
): Either.Either<DecodedExport, string> =>
  decodeDecompressed(raw, contentEncoding, maxDecompressedBytes, decodeJsonBytes)
