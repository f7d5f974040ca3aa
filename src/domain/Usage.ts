import { Schema } from "effect"
import { required } from "./Described.ts"

/** A calendar month, `YYYY-MM` (1970-01 to 9999-12). */
export const UsageMonth = Schema.String.pipe(
  Schema.pattern(/^(19[7-9]\d|[2-9]\d{3})-(0[1-9]|1[0-2])$/, {
    message: () => "month must be a calendar month YYYY-MM between 1970-01 and 9999-12, e.g. 2026-11"
  })
)

// No identifier: an identified URL-params schema becomes a $ref that the OpenAPI generator drops.
export const UsageParams = Schema.Struct({
  month: Schema.optional(UsageMonth)
}).annotations({ parseOptions: { onExcessProperty: "error" } })

const Count = Schema.Number.annotations({ description: "A count (integer ≥ 0)" })
const Money = Schema.String.annotations({ description: "USD, a decimal string" })

/** GET /api/v1/usage: what the account used in one calendar month (UTC). */
export const Usage = Schema.Struct({
  month: required(Schema.String, "The month reported (YYYY-MM, UTC)"),
  periodStart: required(Schema.String, "Start of the month (ISO 8601)"),
  periodEnd: Schema.String.annotations({ description: "Exclusive end of the month" }),
  traces: required(
    Schema.Struct({
      recorded: Count.annotations({ description: "Traces created in the month (deleted ones included)" }),
      spans: Count.annotations({ description: "Spans of those traces" })
    }),
    "Traces recorded in the month"
  ),
  otlp: required(
    Schema.Struct({ requests: Count.annotations({ description: "Accepted POST /v1/traces exports" }) }),
    "OpenTelemetry exports received"
  ),
  replays: required(
    Schema.Struct({
      used: required(Count, "Fork replays started in the month"),
      allowance: required(Count, "Replays the account may start per month"),
      remaining: required(Count, "Replays left this month"),
      tokens: Count.annotations({ description: "Tokens of the replays' result traces" }),
      cost: required(Money, "Cost of the replays' result traces in USD (decimal string)")
    }),
    "Fork replays"
  ),
  evaluations: required(
    Schema.Struct({
      runs: required(Count, "Evaluation runs (traces judged) in the month"),
      judgeTokens: required(Count, "Tokens the judge model used"),
      judgeCost: required(Money, "What judging cost in USD (decimal string)")
    }),
    "Evaluation runs"
  ),
  search: required(Schema.Struct({ queries: required(Count, "Search requests answered") }), "Semantic search"),
  retention: required(
    Schema.Struct({
      retentionDays: required(
        Schema.NullOr(Schema.Number),
        "Days the account's traces are kept (its setting or the configured default); null: until deleted"
      ),
      tracesPurged: required(Count, "Traces the retention purge removed in the month"),
      spansPurged: required(Count, "Spans of those traces")
    }),
    "Retention by age (GET /api/v1/retention)"
  )
}).annotations({ identifier: "Usage" })
export type Usage = typeof Usage.Type
