import { Schema } from "effect"
import { optional, required } from "./Described.ts"

/** GET /health, strict: exactly these fields. */
export const Health = Schema.Struct({
  status: required(Schema.Literal("ok"), "Always ok: the server answers"),
  service: required(Schema.Literal("tapedeck-api"), "Always tapedeck-api"),
  version: required(Schema.String, "The server's version"),
  commit: optional(Schema.String, "The git commit it was built from, when known"),
  buildTime: optional(Schema.String, "When it was built (ISO 8601), when known"),
  deploymentId: optional(Schema.String, "The deployment's id, when configured"),
  timestamp: required(Schema.String, "The server's clock now (ISO 8601)"),
  uptime: required(Schema.Number.pipe(Schema.nonNegative()), "Seconds since the server started")
}).annotations({ identifier: "Health" })
export type Health = typeof Health.Type
