import { Schema } from "effect"
import { required } from "./Described.ts"
import { withExamples } from "./Examples.ts"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** Days a trace is kept after it started: 1 to 36500, or null to inherit (the project from the account, the account from the configuration). */
const RetentionDays = Schema.NullOr(
  Schema.Int.pipe(
    Schema.greaterThanOrEqualTo(1, { message: () => "retention_days must be an integer from 1 to 36500, or null" }),
    Schema.lessThanOrEqualTo(36500, { message: () => "retention_days must be an integer from 1 to 36500, or null" })
  )
)

/** PUT /api/v1/retention and PUT /api/v1/retention/projects/{projectId}. */
export const SetRetentionRequest = withExamples(
  Schema.Struct({
    retention_days: RetentionDays.annotations({
      description:
        "Days a trace is kept after it started (1 to 36500); null inherits (a project the account's, the account the configured default)"
    })
  }).annotations({ ...strict, identifier: "SetRetentionRequest" }),
  { retention_days: 90 },
  { retention_days: null }
)
export type SetRetentionRequest = typeof SetRetentionRequest.Type

export const RetentionProjectPath = Schema.Struct({ projectId: Schema.UUID })

const Days = Schema.NullOr(Schema.Number)

/** The account's retention settings: its own, the configured default, and each project's override. */
export const RetentionSettings = Schema.Struct({
  retentionDays: required(Days, "The account's setting; null when it inherits the default"),
  defaultRetentionDays: required(Days, "TAPEDECK_RETENTION_DAYS; null when traces are kept until deleted"),
  effectiveRetentionDays: required(Days, "What applies to traces without a project override; null: kept until deleted"),
  projects: required(
    Schema.Array(
      Schema.Struct({
        projectId: required(Schema.String, "The project (traces' projectId)"),
        retentionDays: required(Schema.Number, "Days that project's traces are kept")
      })
    ),
    "Projects with their own setting, by id"
  )
}).annotations({ identifier: "RetentionSettings" })
export type RetentionSettings = typeof RetentionSettings.Type
