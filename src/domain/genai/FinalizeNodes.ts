/**
 * The nodes the per-trace finalize pass works on (TraceFinalize.ts): each stored span with what finalize reads
 * back from its metadata, and the shapes finalize returns.
 */
import { SPAN_TEXT_LIMITS } from "#src/domain/Span"
import type { MappedSpan } from "./MapSpan.ts"

/** A span of an OTLP trace as reloaded from storage: the mapped shape, absent optionals absent. */
export type StoredSpan = MappedSpan["span"]

/** What finalizing one trace changes. */
export interface TraceFinalization {
  /**
   * Only spans whose agent fields or promoted usage changed. Each update carries the span's resolved agent
   * fields and, when they changed, its usage fields; a field absent here is left as stored.
   */
  readonly spanUpdates: ReadonlyArray<{
    id: string
    agent_id?: string
    agent_role?: string
    parent_agent_id?: string
    input_tokens?: number
    output_tokens?: number
    cost?: number
    /** Set with `cost` when that cost is the price table's estimate (stored as the span's `cost_estimated`). */
    cost_estimated?: true
    /** A model call's request and answer taken from the step span that wraps it (see `stepPayloads`). */
    input?: unknown
    output?: unknown
  }>
  readonly trace: {
    name: string | null
    status: "running" | "completed" | "failed"
    input?: unknown
    output?: unknown
    sessionId: string | null
    startedAt: string
    endedAt: string | null
    metadata: Record<string, unknown>
    environment: "production" | "sandbox"
    /** The project a sender named (openinference.project.name); absent leaves the trace's project as it is. */
    projectId?: string
  }
}

export type Json = Record<string, unknown>
export type SpanUpdate = TraceFinalization["spanUpdates"][number]

/** Longest session id a trace takes; longer ones are hashed (docs/otel-mapping.md, "Traces"). */
export const MAX_SESSION_ID = 100
export const MAX_TAGS = 50

interface Usage {
  readonly input_tokens?: number
  readonly output_tokens?: number
  readonly cost?: number
}

export interface Node {
  readonly span: StoredSpan
  readonly meta: Json
  readonly otel: Json
  readonly hints: Json
  readonly startMs: number
  readonly endMs: number
  readonly isAgent: boolean
  readonly ownId: string | undefined
  readonly ownRole: string | undefined
  readonly aggregate: Usage | undefined
  parent: Node | undefined
  readonly children: Array<Node>
}

export const isRecord = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)
export const record = (v: unknown): Json => (isRecord(v) ? v : {})
export const text = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined)
const count = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined
export const cap = (s: string, max: number) => {
  if (s.length <= max) return s
  const last = s.charCodeAt(max - 1)
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)
}

const millis = (iso: unknown): number => {
  const ms = typeof iso === "string" ? Date.parse(iso) : Number.NaN
  return Number.isNaN(ms) ? Number.POSITIVE_INFINITY : ms
}

const usageOf = (v: unknown): Usage | undefined => {
  if (!isRecord(v)) return undefined
  const usage: { input_tokens?: number; output_tokens?: number; cost?: number } = {}
  const input = count(v.input_tokens)
  const output = count(v.output_tokens)
  const cost = count(v.cost)
  if (input !== undefined) usage.input_tokens = input
  if (output !== undefined) usage.output_tokens = output
  if (cost !== undefined) usage.cost = cost
  return usage
}

export const nodeOf = (span: StoredSpan): Node => {
  const meta = record(span.metadata)
  const agent = record(meta.agent)
  const aggregate = usageOf(meta.aggregate_usage)
  const startMs = millis(span.started_at)
  const endMs = span.ended_at !== undefined ? millis(span.ended_at) : startMs
  const ownId = text(agent.own_id)
  const ownRole = ownId === undefined ? undefined : text(agent.own_role)
  return {
    span,
    meta,
    otel: record(meta.otel),
    hints: record(meta.trace_hints),
    startMs,
    endMs: endMs === Number.POSITIVE_INFINITY ? Number.NEGATIVE_INFINITY : endMs,
    isAgent: agent.is_agent_span === true,
    ownId: ownId === undefined ? undefined : cap(ownId, SPAN_TEXT_LIMITS.agent_id),
    ownRole: ownRole === undefined ? undefined : cap(ownRole, SPAN_TEXT_LIMITS.agent_role),
    aggregate,
    parent: undefined,
    children: []
  }
}

export const byStart = (x: Node, y: Node) =>
  x.startMs - y.startMs || (x.span.id < y.span.id ? -1 : x.span.id > y.span.id ? 1 : 0)
