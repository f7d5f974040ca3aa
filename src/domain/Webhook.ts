import { Schema } from "effect"

/** Header names of an outbound webhook. */
export const SIGNATURE_HEADER = "Tapedeck-Signature"
export const EVENT_HEADER = "Tapedeck-Event"
export const DELIVERY_HEADER = "Tapedeck-Delivery"

/** The body of an eval-rule webhook. */
export const WebhookPayload = Schema.Struct({
  event: Schema.Literal("evaluation.completed", "evaluation.incomplete"),
  delivery_id: Schema.UUID,
  rule_id: Schema.UUID,
  evaluation_id: Schema.UUID,
  trace_id: Schema.UUID,
  runs: Schema.Array(Schema.Struct({
    id: Schema.UUID,
    status: Schema.String,
    score: Schema.NullOr(Schema.Number)
  })),
  delivered_at: Schema.String
}).annotations({ identifier: "WebhookPayload" })
export type WebhookPayload = typeof WebhookPayload.Type

/** The job that delivers one webhook; `attempt` is the delivery attempt it will make (1-based). */
export const WebhookJobPayload = Schema.Struct({
  deliveryId: Schema.UUID,
  ruleId: Schema.UUID,
  traceId: Schema.UUID,
  evaluationId: Schema.UUID,
  runIds: Schema.Array(Schema.UUID),
  attempt: Schema.Int,
  /** when the rule queued the runs (epoch ms): the wait for them ends TAPEDECK_WEBHOOK_RUN_WAIT_SECONDS later */
  queuedAt: Schema.Number,
  polls: Schema.Int
})
export type WebhookJobPayload = typeof WebhookJobPayload.Type

/** The signed text: `${timestamp}.${body}` (timestamp in Unix seconds). */
export const signedText = (timestamp: number, body: string) => `${timestamp}.${body}`

/** The Tapedeck-Signature header value: `t=<unix seconds>,v1=<hex HMAC-SHA256>`. */
export const signatureHeader = (timestamp: number, hexMac: string) => `t=${timestamp},v1=${hexMac}`

/** Parses a Tapedeck-Signature header; undefined when it is malformed. */
export const parseSignatureHeader = (value: string): { timestamp: number; signatures: Array<string> } | undefined => {
  let timestamp: number | undefined
  const signatures: Array<string> = []
  for (const part of value.split(",")) {
    const [k, v] = part.split("=", 2).map((s) => s.trim())
    if (k === "t" && v !== undefined && /^\d{1,12}$/.test(v)) timestamp = Number(v)
    else if (k === "v1" && v !== undefined && /^[0-9a-f]{64}$/.test(v)) signatures.push(v)
  }
  return timestamp === undefined || signatures.length === 0 ? undefined : { timestamp, signatures }
}

/**
 * Delay before delivery attempt n+1 after attempt n failed: base · 4^(n-1), at most one hour.
 * With the default base of 10 s: 10 s, 40 s, 2 min 40 s, 10 min 40 s, 42 min 40 s.
 */
export const webhookBackoffMs = (baseMs: number, attempt: number) =>
  Math.min(3_600_000, baseMs * 4 ** Math.max(0, Math.min(attempt - 1, 20)))

/** Delay before looking again at runs that are not finished: 1 s, 2 s, 4 s … at most 30 s. */
export const runPollDelayMs = (polls: number) => Math.min(30_000, 1000 * 2 ** Math.min(polls, 10))
