import { Schema } from "effect"

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
  month: Schema.String,
  periodStart: Schema.String,
  periodEnd: Schema.String.annotations({ description: "Exclusive end of the month" }),
  traces: Schema.Struct({
    recorded: Count.annotations({ description: "Traces created in the month (deleted ones included)" }),
    spans: Count.annotations({ description: "Spans of those traces" })
  }),
  otlp: Schema.Struct({ requests: Count.annotations({ description: "Accepted POST /v1/traces exports" }) }),
  replays: Schema.Struct({
    used: Count,
    allowance: Count,
    remaining: Count,
    tokens: Count.annotations({ description: "Tokens of the replays' result traces" }),
    cost: Money
  }),
  evaluations: Schema.Struct({
    runs: Count,
    judgeTokens: Count,
    judgeCost: Money
  }),
  search: Schema.Struct({ queries: Count })
}).annotations({ identifier: "Usage" })
export type Usage = typeof Usage.Type
