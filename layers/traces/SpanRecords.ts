import type { SqlClient } from "@effect/sql"
import { type DateTime, Effect } from "effect"
import { formatInstant } from "#src/domain/Instant"
import { extraFields, type Span, type SpanWire } from "#src/domain/Span"
import { packSkeleton } from "./PartPacking.ts"
import { CUT_BYTES, jsonLengthBound, type PartHasher, partHasher, splitPayload } from "./PayloadSplit.ts"
import { LAYOUT_SELECT, type LayoutRow, withPayloads } from "./SharedParts.ts"

/**
 * The column list of `json_to_recordset` for a batch of spans. A JSON `null` input or output is a flag beside
 * it (`json_to_recordset` reads a JSON null as SQL NULL, which stands for an absent value).
 */
export const SPAN_RECORD_COLUMNS = `id uuid, parent_id uuid, span_type text, name text, model text,
  input json, input_null boolean, output json, output_null boolean, input_tokens bigint, output_tokens bigint,
  cost numeric, duration_ms bigint, metadata json, agent_id text, parent_agent_id text, agent_role text,
  started_at timestamptz, ended_at timestamptz, error text, extra json,
  input_skel text, input_parts text[], input_hashes text[], output_skel text, output_parts text[], output_hashes text[],
  input_refs text, output_refs text`

/** The SELECT list that turns those records into `spans` columns (after trace_id and account_id). */
export const SPAN_RECORD_VALUES = `x.id, x.parent_id, x.span_type, x.name, x.model,
  CASE WHEN x.input_null THEN 'null'::json ELSE x.input END, CASE WHEN x.output_null THEN 'null'::json ELSE x.output END,
  x.input_tokens, x.output_tokens, x.cost, x.duration_ms, x.metadata, x.agent_id, x.parent_agent_id,
  x.agent_role, x.started_at, x.ended_at, x.error, x.extra, x.input_skel, x.input_parts, x.input_hashes,
  x.output_skel, x.output_parts, x.output_hashes, x.input_refs, x.output_refs`

export const SPAN_COLUMNS = `id, parent_id, span_type, name, model, input, output, input_tokens, output_tokens,
  cost, duration_ms, metadata, agent_id, parent_agent_id, agent_role, started_at, ended_at, error, extra`

/**
 * The columns a split payload is written to (PayloadSplit): its skeleton, its parts' text and their hashes, which the
 * trigger of 0030_shared_span_content turns into references (parts and hashes are never stored); or its skeleton
 * and the references themselves, when the writer resolved the parts first (`withResolvedParts`).
 */
export const SPLIT_COLUMNS =
  "input_skel, input_parts, input_hashes, output_skel, output_parts, output_hashes, input_refs, output_refs"

/** SPAN_COLUMNS, then SPLIT_COLUMNS: what SPAN_RECORD_VALUES fills. */
export const SPAN_WRITE_COLUMNS = `${SPAN_COLUMNS}, ${SPLIT_COLUMNS}`

/** Whether the span has the payload (a JSON null counts; SQL NULL in both layouts is absent). */
export const payloadPresent = (column: "input" | "output", s = "") =>
  `(${s}${column} IS NOT NULL OR ${s}${column}_skel IS NOT NULL)`

/**
 * The SELECT list that reads spans back: payloads in their stored layout (LAYOUT_SELECT, put together by
 * `withPayloads`, then parsed by `fromRow`), numbers as float8. With `payloadsWhen`, input and output are left out of
 * the rows for which that SQL condition is false.
 */
export const spanSelect = (payloadsWhen = "true") => {
  // Left out only where the condition is false (not where it is NULL), as before payloads were put together here.
  const when = (expr: string) =>
    payloadsWhen === "true" ? expr : `CASE WHEN NOT (${payloadsWhen}) THEN NULL ELSE ${expr} END`
  return `id, parent_id, span_type, name, model,
  ${when("input::text")} AS input, ${when("input_skel")} AS input_skel, ${when("input_refs")} AS input_refs,
  ${when("output::text")} AS output, ${when("output_skel")} AS output_skel, ${when("output_refs")} AS output_refs,
  input_tokens::float8 AS input_tokens, output_tokens::float8 AS output_tokens, cost::float8 AS cost,
  duration_ms::float8 AS duration_ms, metadata, agent_id, parent_agent_id, agent_role, started_at, ended_at,
  error, extra`
}

export const SPAN_SELECT = spanSelect()

/**
 * What the detail's JSON text of a stored span is built from (`spanJsonRow`): the json columns' text as stored
 * (passed through, never parsed here), times as epoch milliseconds (truncated, as `toISOString`
 * prints them), numbers as float8.
 */
export const SPAN_PARTS_SELECT = `id, parent_id, floor(EXTRACT(EPOCH FROM started_at) * 1000)::float8 AS start_ms,
  floor(EXTRACT(EPOCH FROM ended_at) * 1000)::float8 AS end_ms, duration_ms::float8 AS duration_ms, span_type, name,
  model, input::text AS input, output::text AS output, ${LAYOUT_SELECT}, input_tokens::text AS input_tokens,
  output_tokens::text AS output_tokens, cost::float8 AS cost, metadata::text AS metadata, agent_id, parent_agent_id,
  agent_role, error, extra::text AS extra`

export interface SpanPartsRow extends LayoutRow {
  readonly id: string
  readonly parent_id: string | null
  readonly start_ms: number
  readonly end_ms: number | null
  readonly duration_ms: number | null
  readonly span_type: string
  readonly name: string
  readonly model: string | null
  readonly input: string | null
  readonly output: string | null
  readonly input_tokens: string | null
  readonly output_tokens: string | null
  readonly cost: number | null
  readonly metadata: string | null
  readonly agent_id: string | null
  readonly parent_agent_id: string | null
  readonly agent_role: string | null
  readonly error: string | null
  readonly extra: string | null
}

/** A stored span and, beside it, what the causal order needs: ids and times as epoch milliseconds. */
export interface SpanJsonRow extends Pick<SpanPartsRow, "id" | "parent_id" | "start_ms" | "end_ms" | "duration_ms"> {
  /** The span as the JSON text `JSON.stringify(fromRow(row))` gives: the same keys in the same order, the same values once parsed. */
  readonly json: string
}

const isoMillis = (ms: number) => new Date(ms).toISOString()

/** The JSON text of a span read by SPAN_PARTS_SELECT (extras first, as `fromRow` spreads them; absent fields left out). */
export const spanJsonRow = (r: SpanPartsRow): SpanJsonRow => {
  let json = r.extra !== null && r.extra !== "{}" ? `{${r.extra.slice(1, -1)},` : "{"
  json += `"id":"${r.id}","parent_id":${r.parent_id === null ? "null" : `"${r.parent_id}"`},"span_type":${JSON.stringify(
    r.span_type
  )},"name":${JSON.stringify(r.name)}`
  if (r.model !== null) json += `,"model":${JSON.stringify(r.model)}`
  if (r.input !== null) json += `,"input":${r.input}`
  if (r.output !== null) json += `,"output":${r.output}`
  if (r.input_tokens !== null) json += `,"input_tokens":${r.input_tokens}`
  if (r.output_tokens !== null) json += `,"output_tokens":${r.output_tokens}`
  if (r.cost !== null) json += `,"cost":${r.cost}`
  if (r.duration_ms !== null) json += `,"duration_ms":${r.duration_ms}`
  if (r.metadata !== null) json += `,"metadata":${r.metadata}`
  if (r.agent_id !== null) json += `,"agent_id":${JSON.stringify(r.agent_id)}`
  if (r.parent_agent_id !== null) json += `,"parent_agent_id":${JSON.stringify(r.parent_agent_id)}`
  if (r.agent_role !== null) json += `,"agent_role":${JSON.stringify(r.agent_role)}`
  json += `,"started_at":"${isoMillis(r.start_ms)}"`
  if (r.end_ms !== null) json += `,"ended_at":"${isoMillis(r.end_ms)}"`
  if (r.error !== null) json += `,"error":${JSON.stringify(r.error)}`
  return {
    id: r.id,
    parent_id: r.parent_id,
    start_ms: r.start_ms,
    end_ms: r.end_ms,
    duration_ms: r.duration_ms,
    json: `${json}}`
  }
}

/** The distinct models of a set of spans, sorted (a trace's `models`, what `GET /api/v1/traces?model=` matches). */
const SPAN_MODELS = `COALESCE(array_agg(DISTINCT model ORDER BY model) FILTER (WHERE model IS NOT NULL), '{}'::text[])`

/** Whether a span of the set recorded an error: an `error` text, or a span of type `error` (a trace's `has_error`). */
const SPAN_HAS_ERROR = `COALESCE(bool_or(error IS NOT NULL OR span_type = 'error'), false)`

/** A json value read as `json_build_array(v)`: SQL NULL (absent) is undefined, JSON null stays null. */
export const unwrap = (wrapped: unknown): unknown => (Array.isArray(wrapped) ? wrapped[0] : undefined)

/**
 * Aggregates over a set of spans: their count, token and cost sums (tokens capped to a safe integer), last end, and
 * what the trace listing filters on: the models used (distinct, sorted) and whether any span recorded an error.
 */
export const SPAN_TOTALS = `count(*)::int AS n,
  LEAST(COALESCE(sum(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)), 0), 9007199254740991) AS tokens,
  COALESCE(sum(cost), 0) AS cost,
  max(COALESCE(ended_at, started_at + duration_ms * interval '1 millisecond', started_at)) AS last_end,
  ${SPAN_MODELS} AS models,
  ${SPAN_HAS_ERROR} AS has_error`

/** What replaces a stored span when the same id is written again (a re-send is idempotent). */
export const SPAN_UPSERT = `ON CONFLICT (trace_id, id) DO UPDATE SET
  parent_id = EXCLUDED.parent_id, span_type = EXCLUDED.span_type, name = EXCLUDED.name,
  model = EXCLUDED.model, input = EXCLUDED.input, output = EXCLUDED.output,
  input_skel = EXCLUDED.input_skel, input_refs = EXCLUDED.input_refs,
  output_skel = EXCLUDED.output_skel, output_refs = EXCLUDED.output_refs,
  input_tokens = EXCLUDED.input_tokens, output_tokens = EXCLUDED.output_tokens, cost = EXCLUDED.cost,
  duration_ms = EXCLUDED.duration_ms, metadata = EXCLUDED.metadata, agent_id = EXCLUDED.agent_id,
  parent_agent_id = EXCLUDED.parent_agent_id, agent_role = EXCLUDED.agent_role,
  started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at, error = EXCLUDED.error,
  extra = EXCLUDED.extra`

const iso = (dt: DateTime.Utc | string | undefined) =>
  dt === undefined || typeof dt === "string" ? dt : formatInstant(dt)

/** One span (decoded, or already JSON) as a record for `json_to_recordset`. */
export const toRecord = (span: Span | SpanWire) => ({
  id: span.id,
  parent_id: span.parent_id,
  span_type: span.span_type,
  name: span.name,
  model: span.model,
  input: span.input ?? undefined,
  input_null: span.input === null ? true : undefined,
  output: span.output ?? undefined,
  output_null: span.output === null ? true : undefined,
  input_tokens: span.input_tokens,
  output_tokens: span.output_tokens,
  cost: span.cost,
  duration_ms: span.duration_ms,
  metadata: span.metadata,
  agent_id: span.agent_id,
  parent_agent_id: span.parent_agent_id,
  agent_role: span.agent_role,
  started_at: iso(span.started_at),
  ended_at: iso(span.ended_at),
  error: span.error,
  extra: extraFields(span)
})

/**
 * As `toRecord`, with large payloads split into a skeleton and shared parts (PayloadSplit); `stored` tells which
 * parts can be sent by hash only, `sent` receives every part's hash.
 */
export const toWriteRecord = (
  span: Span | SpanWire,
  stored?: (hash: string) => boolean,
  sent?: Set<string>,
  hash?: (text: string) => string
) => {
  const record = toRecord(span)
  const input = splitPayload(record.input, stored, hash)
  const output = splitPayload(record.output, stored, hash)
  if (input === undefined && output === undefined) return record
  if (sent !== undefined) {
    for (const h of input?.hashes ?? []) sent.add(h)
    for (const h of output?.hashes ?? []) sent.add(h)
  }
  return {
    ...record,
    input: input === undefined ? record.input : undefined,
    input_skel: input && packSkeleton(input.skel),
    input_parts: input?.parts,
    input_hashes: input?.hashes,
    output: output === undefined ? record.output : undefined,
    output_skel: output && packSkeleton(output.skel),
    output_parts: output?.parts,
    output_hashes: output?.hashes
  }
}

type WriteRecord = ReturnType<typeof toWriteRecord>

/**
 * The record with its `column` payload, stored whole because under SHARE_BYTES, referenced instead when its text is
 * a part of the batch (another span's payload holds it, split): a model call's answer is the same message as the one
 * the next call's history holds, which is a part. Stored as one part (skeleton \x01), its text sent by that other
 * span (or known stored): `withResolvedParts` resolves a batch's parts in one call whichever record sends the text.
 */
const asBatchPart = (
  record: WriteRecord,
  column: "input" | "output",
  hash: PartHasher,
  sent: Set<string> | undefined
): WriteRecord => {
  const value = (record as { readonly input?: unknown; readonly output?: unknown })[column]
  if (value === null || value === undefined || (typeof value !== "object" && typeof value !== "string")) return record
  if (jsonLengthBound(value, CUT_BYTES) < CUT_BYTES) return record
  const text = JSON.stringify(value)
  if (text === undefined || hash.has?.(text) !== true) return record
  const h = hash(text)
  sent?.add(h)
  return {
    ...record,
    [column]: undefined,
    [`${column}_skel`]: "\x01",
    [`${column}_parts`]: [null],
    [`${column}_hashes`]: [h]
  }
}

/**
 * The spans' write records (toWriteRecord), each part's text sent once and hashed once for the batch, and payloads
 * stored whole that are parts of the batch referenced (`asBatchPart`). For writers that resolve the batch's parts
 * at once (`withResolvedParts`), not row by row: a record may reference a part whose text a later record sends.
 */
export const toWriteRecords = (
  spans: ReadonlyArray<Span | SpanWire>,
  stored?: (hash: string) => boolean,
  sent?: Set<string>
) => {
  const omit = once(stored)
  const hash = partHasher()
  const records = spans.map((span) => toWriteRecord(span, omit, sent, hash))
  // Nothing split: nothing to reference (a batch of small payloads is written as it was, nothing serialized here).
  if (!records.some((r) => "input_hashes" in r || "output_hashes" in r)) return records
  return records.map((r) => asBatchPart(asBatchPart(r, "input", hash, sent), "output", hash, sent))
}

export const toRecordsJson = (
  spans: ReadonlyArray<Span | SpanWire>,
  stored?: (hash: string) => boolean,
  sent?: Set<string>
) => JSON.stringify(toWriteRecords(spans, stored, sent))

/**
 * `stored`, extended to the parts an earlier record of the same batch sends: a statement stores its rows in order, and
 * a part stored by an earlier row is found by the later ones (their text is sent once per statement).
 */
export const once = (stored?: (hash: string) => boolean) => {
  const seen = new Set<string>()
  return (hash: string) => {
    if (seen.has(hash) || stored?.(hash) === true) return true
    seen.add(hash)
    return false
  }
}

/**
 * A stored span as read back by `spanSelect` (bigint and numeric columns cast to float8 in SQL); `input` and `output`
 * are JSON text once `withPayloads` put them together.
 */
export interface SpanRow extends LayoutRow {
  readonly id: string
  readonly parent_id: string | null
  readonly span_type: Span["span_type"]
  readonly name: string
  readonly model: string | null
  readonly input_tokens: number | null
  readonly output_tokens: number | null
  readonly cost: number | null
  readonly duration_ms: number | null
  readonly metadata: Record<string, unknown> | null
  readonly agent_id: string | null
  readonly parent_agent_id: string | null
  readonly agent_role: string | null
  readonly started_at: Date
  readonly ended_at: Date | null
  readonly error: string | null
  readonly extra: Record<string, unknown> | null
}

/**
 * A stored span as JSON for the wire: absent optionals stay absent, extras come back as sent. The row's payloads must
 * have been put together (`withPayloads`, or `readSpans`).
 */
export const fromRow = (row: SpanRow): SpanWire => {
  const span: Record<string, unknown> = { ...row.extra }
  span.id = row.id
  span.parent_id = row.parent_id
  span.span_type = row.span_type
  span.name = row.name
  if (row.model !== null) span.model = row.model
  if (row.input !== null) span.input = JSON.parse(row.input)
  if (row.output !== null) span.output = JSON.parse(row.output)
  if (row.input_tokens !== null) span.input_tokens = row.input_tokens
  if (row.output_tokens !== null) span.output_tokens = row.output_tokens
  if (row.cost !== null) span.cost = row.cost
  if (row.duration_ms !== null) span.duration_ms = row.duration_ms
  if (row.metadata !== null) span.metadata = row.metadata
  if (row.agent_id !== null) span.agent_id = row.agent_id
  if (row.parent_agent_id !== null) span.parent_agent_id = row.parent_agent_id
  if (row.agent_role !== null) span.agent_role = row.agent_role
  span.started_at = row.started_at.toISOString()
  if (row.ended_at !== null) span.ended_at = row.ended_at.toISOString()
  if (row.error !== null) span.error = row.error
  return span as SpanWire
}

/** Spans read by `spanSelect`, their payloads put together from their parts (read once each), as for the wire. */
export const readSpans = <R extends SpanRow>(sql: SqlClient.SqlClient, rows: ReadonlyArray<R>) =>
  Effect.map(withPayloads(sql, rows), (full) => full.map((row) => ({ row, span: fromRow(row) })))
