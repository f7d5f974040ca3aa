import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// Installed guardrail types count an account's allowed decisions (a per-tool daily quota: allowed calls of a tool
// since midnight) through `allowedCount` (layers/enforcement/GuardrailTypeEvaluation.ts): by account, tool and time.
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE INDEX IF NOT EXISTS enforcement_decisions_allowed
    ON enforcement_decisions (account_id, tool_name, created_at) WHERE verdict = 'allow'`
})
