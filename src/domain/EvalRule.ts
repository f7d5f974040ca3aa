import { Schema } from "effect"
import { pageParams } from "./Page.ts"
import { globMatch } from "./PolicyEvaluation.ts"
import { ProjectId } from "./Ids.ts"
import { Text } from "./Json.ts"
import { withExamples } from "./Examples.ts"
import { optional, required, withDefault } from "./Described.ts"

export const EvalRuleId = Schema.UUID.pipe(Schema.brand("EvalRuleId"))
export type EvalRuleId = typeof EvalRuleId.Type

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** A metadata value a filter can require: a JSON scalar, compared for equality. */
const MetadataValue = Schema.Union(Schema.String.pipe(Schema.maxLength(1000)), Schema.Number.pipe(Schema.finite()), Schema.Boolean, Schema.Null)

/** A metadata key a filter can name; `__proto__` would vanish in decoding (silently widening the filter). */
const MetadataKey = Text(200).pipe(
  Schema.minLength(1),
  Schema.filter((k) => k !== "__proto__" || "__proto__ cannot be a metadata key")
)

/** Which terminal traces a rule applies to (strict; every given condition must hold). */
export const EvalRuleFilter = Schema.Struct({
  project_id: optional(ProjectId, "Only traces of this project"),
  /** Glob over the trace name: `*` any run of characters, `?` one character; a trace without a name never matches. */
  name_pattern: optional(Text(500).pipe(Schema.minLength(1)), "Only traces whose name matches this glob (* matches any text)"),
  status: optional(Schema.Literal("completed", "failed"), "Only traces that ended in this status"),
  metadata: optional(
    Schema.Record({ key: MetadataKey, value: MetadataValue }).pipe(
      Schema.filter((m) => Object.keys(m).length <= 20 || "at most 20 metadata conditions")
    ),
    "Only traces whose metadata has each of these keys with exactly this value (at most 20)"
  ),
  /** The trace's total cost (USD) must be at least this. */
  min_cost: optional(Schema.Number.pipe(Schema.finite(), Schema.between(0, 1e12)), "Only traces whose total cost is at least this (USD)")
}).annotations({ identifier: "EvalRuleFilter", ...strict })
export type EvalRuleFilter = typeof EvalRuleFilter.Type

/** Why a webhook URL is refused before any address check, or undefined when it is an acceptable https URL. */
export const webhookUrlProblem = (text: string): string | undefined => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return "must be an absolute URL"
  }
  if (url.protocol !== "https:") return "must be an https URL"
  if (url.username !== "" || url.password !== "") return "must not carry credentials"
  if (url.hostname === "") return "must name a host"
  if (url.hash !== "") return "must not have a fragment"
  return undefined
}

export const WebhookUrl = Schema.String.pipe(
  Schema.maxLength(2048),
  Schema.filter((s) => {
    const problem = webhookUrlProblem(s)
    return problem === undefined || problem
  })
).annotations({ description: "An https URL (no credentials, no fragment); private and internal addresses are refused" })

/** Body of POST /api/v1/eval-rules (strict). */
export const CreateEvalRuleRequest = withExamples(
  Schema.Struct({
    evaluation_id: required(Schema.UUID, "The evaluation that judges each matching trace when it finishes"),
    name: optional(Text(500), "A label for the rule (at most 500 characters)"),
    filter: withDefault(EvalRuleFilter, () => ({}), "Which finished traces the rule applies to; every condition must hold; default all"),
    sampling_rate: withDefault(
      Schema.Number.pipe(Schema.finite(), Schema.between(0, 1)),
      () => 1,
      "The share of matching traces that are judged, 0 to 1 (the same trace is always in or out); default 1"
    ),
    webhook_url: optional(WebhookUrl, "Where each result is POSTed, signed with the rule's webhook secret"),
    enabled: withDefault(Schema.Boolean, () => true, "The rule applies to new traces; default true")
  }).annotations({ identifier: "CreateEvalRuleRequest", ...strict }),
  {
    evaluation_id: "3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0a",
    name: "Score completed bookings",
    filter: { name_pattern: "book-*", status: "completed" },
    sampling_rate: 0.25
  }
)
export type CreateEvalRuleRequest = typeof CreateEvalRuleRequest.Type

/** An eval rule in responses (camelCase). `webhookSecret` appears once, in the answer to its creation. */
export const EvalRule = Schema.Struct({
  id: required(EvalRuleId, "The rule's id"),
  evaluationId: required(Schema.UUID, "The evaluation that judges the matching traces"),
  name: required(Schema.NullOr(Schema.String), "The rule's label, or null"),
  filter: required(EvalRuleFilter, "Which finished traces the rule applies to"),
  samplingRate: required(Schema.Number, "The share of matching traces that are judged, 0 to 1"),
  webhookUrl: required(Schema.NullOr(Schema.String), "Where results are POSTed, or null"),
  enabled: required(Schema.Boolean, "The rule applies to new traces"),
  createdAt: required(Schema.String, "When it was created (ISO 8601)"),
  updatedAt: required(Schema.String, "When it last changed (ISO 8601)"),
  webhookSecret: optional(Schema.String, "The secret webhook deliveries are signed with; shown only when the rule is created")
}).annotations({ identifier: "EvalRule" })
export type EvalRule = typeof EvalRule.Type

export const EvalRuleList = Schema.Struct({
  items: required(Schema.Array(EvalRule), "This page's rules"),
  total: required(Schema.Int, "How many rules there are, over all pages"),
  limit: required(Schema.Int, "The page size asked for"),
  offset: required(Schema.Int, "How many were skipped before this page")
}).annotations({ identifier: "EvalRuleList" })

export const ListEvalRulesParams = Schema.Struct({ ...pageParams }).annotations(strict)
export const EvalRulePath = Schema.Struct({ id: EvalRuleId })

/** One attempt to deliver a webhook (the delivery log). */
export const WebhookDeliveryAttempt = Schema.Struct({
  id: required(Schema.UUID, "The attempt's id"),
  deliveryId: required(Schema.UUID, "The delivery it belongs to: retries of one delivery share it"),
  ruleId: required(EvalRuleId, "The rule whose webhook was called"),
  traceId: required(Schema.UUID, "The trace the result is about"),
  event: required(Schema.String, "The event delivered"),
  attempt: required(Schema.Int, "Which attempt of the delivery this was, from 1"),
  outcome: required(
    Schema.Literal("succeeded", "failed", "blocked", "gave_up"),
    "succeeded (a 2xx), failed (will be retried), blocked (the address is refused) or gave_up (no retries left)"
  ),
  statusCode: required(Schema.NullOr(Schema.Int), "The HTTP status the webhook answered, or null"),
  error: required(Schema.NullOr(Schema.String), "Why the attempt failed, or null"),
  durationMs: required(Schema.NullOr(Schema.Number), "How long the call took in milliseconds, or null"),
  nextAttemptAt: required(Schema.NullOr(Schema.String), "When the next retry is due (ISO 8601), or null"),
  createdAt: required(Schema.String, "When the attempt was made (ISO 8601)")
}).annotations({ identifier: "WebhookDeliveryAttempt" })
export type WebhookDeliveryAttempt = typeof WebhookDeliveryAttempt.Type

export const WebhookDeliveryList = Schema.Struct({
  items: required(Schema.Array(WebhookDeliveryAttempt), "This page's attempts, newest first"),
  total: required(Schema.Int, "How many attempts there are, over all pages"),
  limit: required(Schema.Int, "The page size asked for"),
  offset: required(Schema.Int, "How many were skipped before this page")
}).annotations({ identifier: "WebhookDeliveryList" })

/** What a filter is matched against: the terminal trace as stored. */
export interface RuleSubject {
  readonly projectId: string | null
  readonly name: string | null
  readonly status: "completed" | "failed"
  readonly metadata: Readonly<Record<string, unknown>> | null
  /** numeric, as the database returns it */
  readonly totalCost: string
}

/** Whether a terminal trace satisfies every condition of a filter (an empty filter matches every trace). */
export const matchesFilter = (filter: EvalRuleFilter, trace: RuleSubject): boolean => {
  if (filter.project_id !== undefined && trace.projectId?.toLowerCase() !== filter.project_id.toLowerCase()) return false
  if (filter.status !== undefined && trace.status !== filter.status) return false
  if (filter.name_pattern !== undefined && (trace.name === null || !globMatch(filter.name_pattern, trace.name))) {
    return false
  }
  if (filter.min_cost !== undefined && !(Number(trace.totalCost) >= filter.min_cost)) return false
  if (filter.metadata !== undefined) {
    for (const [key, expected] of Object.entries(filter.metadata)) {
      const metadata = trace.metadata ?? {}
      if (!Object.hasOwn(metadata, key)) return false
      if (metadata[key] !== expected) return false
    }
  }
  return true
}

/** cyrb53: a fast 53-bit string hash with good dispersion (public domain, bryc). */
const hash53 = (text: string) => {
  let h1 = 0xdeadbeef
  let h2 = 0x41c6ce57
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return 4294967296 * (2097151 & h2) + (h1 >>> 0)
}

/** A point in [0, 1) fixed by the rule and the trace: the same pair always draws the same point. */
export const samplePoint = (ruleId: string, traceId: string) =>
  hash53(`${ruleId.toLowerCase()}:${traceId.toLowerCase()}`) / 2 ** 53

/** Deterministic sampling: rate 0 never, rate 1 always, otherwise about `rate` of the traces. */
export const isSampled = (rate: number, ruleId: string, traceId: string) => samplePoint(ruleId, traceId) < rate

