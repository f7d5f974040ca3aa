/** A hold as GET /api/v1/enforcement/holds lists it (a free-form object on the wire; these are the fields shown). */
export interface HoldView {
  readonly id: string
  readonly runId: string
  readonly toolName: string | null
  readonly model: string | null
  readonly toolArgsHash: string | null
  readonly status: string
  readonly reason: string | null
  readonly expiresAt: string | null
  readonly createdAt: string
}

const text = (v: unknown): string | null => (typeof v === "string" ? v : null)

/** Reads a listed hold; an item without an id or run is skipped rather than shown half-empty. */
export const readHold = (item: Readonly<Record<string, unknown>>): HoldView | undefined => {
  const id = text(item.id)
  const runId = text(item.runId)
  if (id === null || runId === null) return undefined
  return {
    id,
    runId,
    toolName: text(item.toolName),
    model: text(item.model),
    toolArgsHash: text(item.toolArgsHash),
    status: text(item.status) ?? "pending",
    reason: text(item.reason),
    expiresAt: text(item.expiresAt),
    createdAt: text(item.createdAt) ?? ""
  }
}

/** A decision as GET /api/v1/enforcement/decisions lists it (the fields shown). */
export interface DecisionView {
  readonly id: string
  readonly runId: string
  readonly verdict: string
  readonly toolName: string | null
  readonly model: string | null
  readonly policyType: string | null
  readonly reason: string
  readonly latencyMs: number | null
  readonly createdAt: string
  readonly traceId: string | null
}

export const readDecision = (item: Readonly<Record<string, unknown>>): DecisionView | undefined => {
  const id = text(item.id) ?? (typeof item.id === "number" ? String(item.id) : null)
  const runId = text(item.run_id)
  const verdict = text(item.verdict)
  if (id === null || runId === null || verdict === null) return undefined
  return {
    id,
    runId,
    verdict,
    toolName: text(item.tool_name),
    model: text(item.model),
    policyType: text(item.policy_type),
    reason: text(item.reason) ?? "",
    latencyMs: typeof item.latency_ms === "number" ? item.latency_ms : null,
    createdAt: text(item.created_at) ?? "",
    traceId: text(item.trace_id)
  }
}
