import { Schema } from "effect"

/** GET /health, strict: exactly these fields. */
export const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  service: Schema.Literal("tapedeck-api"),
  version: Schema.String,
  commit: Schema.optional(Schema.String),
  buildTime: Schema.optional(Schema.String),
  deploymentId: Schema.optional(Schema.String),
  timestamp: Schema.String,
  uptime: Schema.Number.pipe(Schema.nonNegative())
}).annotations({ identifier: "Health" })
export type Health = typeof Health.Type
