import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { CreateGuardrailRequest, PolicyType } from "#src/domain/Guardrail"
import type { AccountId } from "#src/domain/Ids"
import { PolicyStore } from "./PolicyStore.ts"
import { GuardrailNotFound, HoldAlreadyDecided, HoldNotFound } from "#src/domain/Errors"

const GUARDRAIL_SELECT = `id, type, name, project_id AS "projectId", enabled, params,
  created_at AS "createdAt", updated_at AS "updatedAt"`

interface GuardrailRow {
  readonly id: string
  readonly type: PolicyType
  readonly name: string | null
  readonly projectId: string | null
  readonly enabled: boolean
  readonly params: Record<string, unknown>
  readonly createdAt: Date
  readonly updatedAt: Date
}

const toGuardrail = (r: GuardrailRow) => ({ ...r, createdAt: r.createdAt.toISOString(), updatedAt: r.updatedAt.toISOString() })

const HOLD_SELECT = `id, policy_id AS "policyId", run_id AS "runId", tool_name AS "toolName",
  tool_args_hash AS "toolArgsHash", model,
  CASE WHEN status = 'pending' AND expires_at IS NOT NULL AND expires_at <= now() THEN 'expired' ELSE status END AS status,
  reason, decided_by AS "decidedBy", consumed, expires_at AS "expiresAt", created_at AS "createdAt", decided_at AS "decidedAt"`

const iso = (d: unknown) => (d instanceof Date ? d.toISOString() : d)
const toHold = (r: Record<string, unknown>) => ({ ...r, expiresAt: iso(r.expiresAt), createdAt: iso(r.createdAt), decidedAt: iso(r.decidedAt) })

/** Guardrail policies, holds and the decision log of an account. Every change invalidates the policy cache. */
export class GuardrailRepo extends Effect.Service<GuardrailRepo>()("tapedeck/GuardrailRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const store = yield* PolicyStore

    const create = Effect.fn("GuardrailRepo.create")(
      function*(accountId: AccountId, request: CreateGuardrailRequest) {
        const rows = yield* sql<GuardrailRow>`
          INSERT INTO guardrails (id, account_id, project_id, type, name, enabled, params)
          VALUES (${crypto.randomUUID()}, ${accountId}, ${request.project_id ?? null}, ${request.type},
                  ${request.name ?? null}, ${request.enabled}, ${JSON.stringify(request.params)}::jsonb)
          RETURNING ${sql.literal(GUARDRAIL_SELECT)}`
        yield* store.invalidate(accountId)
        return toGuardrail(rows[0]!)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const list = Effect.fn("GuardrailRepo.list")(
      function*(accountId: AccountId) {
        const rows = yield* sql<GuardrailRow>`
          SELECT ${sql.literal(GUARDRAIL_SELECT)} FROM guardrails
          WHERE account_id = ${accountId} AND deleted_at IS NULL ORDER BY created_at, id`
        return rows.map(toGuardrail)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const get = Effect.fn("GuardrailRepo.get")(
      function*(accountId: AccountId, id: string) {
        const rows = yield* sql<GuardrailRow>`
          SELECT ${sql.literal(GUARDRAIL_SELECT)} FROM guardrails
          WHERE id = ${id} AND account_id = ${accountId} AND deleted_at IS NULL`
        if (rows[0] === undefined) return yield* new GuardrailNotFound({ id })
        return toGuardrail(rows[0])
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const update = Effect.fn("GuardrailRepo.update")(
      function*(accountId: AccountId, id: string, change: { readonly name?: string | null | undefined; readonly enabled?: boolean | undefined; readonly params?: unknown }) {
        const rows = yield* sql<GuardrailRow>`
          UPDATE guardrails SET
            name = CASE WHEN ${change.name !== undefined}::boolean THEN ${change.name ?? null} ELSE name END,
            enabled = COALESCE(${change.enabled ?? null}::boolean, enabled),
            params = COALESCE(${change.params === undefined ? null : JSON.stringify(change.params)}::jsonb, params),
            updated_at = now()
          WHERE id = ${id} AND account_id = ${accountId} AND deleted_at IS NULL
          RETURNING ${sql.literal(GUARDRAIL_SELECT)}`
        if (rows[0] === undefined) return yield* new GuardrailNotFound({ id })
        yield* store.invalidate(accountId)
        return toGuardrail(rows[0])
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const remove = Effect.fn("GuardrailRepo.remove")(
      function*(accountId: AccountId, id: string) {
        const rows = yield* sql`
          UPDATE guardrails SET deleted_at = now() WHERE id = ${id} AND account_id = ${accountId} AND deleted_at IS NULL
          RETURNING id`
        if (rows.length === 0) return yield* new GuardrailNotFound({ id })
        yield* store.invalidate(accountId)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const holds = Effect.fn("GuardrailRepo.holds")(
      function*(accountId: AccountId, status: string | undefined) {
        const rows = yield* sql<Record<string, unknown>>`
          SELECT * FROM (SELECT ${sql.literal(HOLD_SELECT)} FROM enforcement_holds WHERE account_id = ${accountId}) h
          ${status === undefined ? sql`` : sql`WHERE h.status = ${status}`}
          ORDER BY "createdAt" DESC LIMIT 500`
        return rows.map(toHold)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Approves or denies a pending, unexpired hold; the approver (credential) and reason are recorded. */
    const decideHold = Effect.fn("GuardrailRepo.decideHold")(
      function*(accountId: AccountId, id: string, status: "approved" | "denied", by: string, reason: string | null) {
        const rows = yield* sql<Record<string, unknown>>`
          UPDATE enforcement_holds SET status = ${status}, decided_by = ${by}, reason = ${reason}, decided_at = now()
          WHERE id = ${id} AND account_id = ${accountId} AND status = 'pending'
            AND (expires_at IS NULL OR expires_at > now())
          RETURNING ${sql.literal(HOLD_SELECT)}`
        if (rows[0] !== undefined) return toHold(rows[0])
        const existing = yield* sql<{ status: string }>`
          SELECT ${sql.literal(HOLD_SELECT)} FROM enforcement_holds WHERE id = ${id} AND account_id = ${accountId}`
        if (existing[0] === undefined) return yield* new HoldNotFound({ id })
        return yield* new HoldAlreadyDecided({ id, status: existing[0].status })
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const decisions = Effect.fn("GuardrailRepo.decisions")(
      function*(accountId: AccountId, runId: string | undefined, limit: number) {
        const rows = yield* sql<Record<string, unknown>>`
          SELECT id, run_id, trace_id, step_index::float8 AS step_index, tool_name, model, verdict, policy_id, policy_type,
                 hold_id, reason, latency_ms, created_at
          FROM enforcement_decisions
          WHERE account_id = ${accountId} ${runId === undefined ? sql`` : sql`AND run_id = ${runId}`}
          ORDER BY created_at DESC LIMIT ${limit}`
        return rows.map((r) => ({ ...r, created_at: iso(r.created_at) }))
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { create, list, get, update, remove, holds, decideHold, decisions } as const
  })
}) {}
