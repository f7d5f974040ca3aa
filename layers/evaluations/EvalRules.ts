import { SqlClient } from "@effect/sql"
import { DateTime, Effect } from "effect"
import {
  type CreateEvalRuleRequest,
  type EvalRule,
  type EvalRuleFilter,
  EvalRuleId,
  isSampled,
  matchesFilter,
  type WebhookDeliveryAttempt
} from "#src/domain/EvalRule"
import type { EvaluationId } from "#src/domain/Evaluation"
import type { AccountId } from "#src/domain/Ids"
import type { WebhookJobPayload } from "#src/domain/Webhook"
import type { TerminalTrace } from "../events/TerminalTraceHook.ts"
import { classifyAddress, hostNameProblem, isIpLiteral } from "../webhooks/AddressGuard.ts"
import { newWebhookSecret } from "../webhooks/Signing.ts"
import { WebhookDelivery } from "../webhooks/WebhookDelivery.ts"
import { uuidArray } from "../storage/SqlArrays.ts"
import { Evaluations } from "./Evaluations.ts"
import { EvalRuleNotFound, RuleEvaluationNotFound, WebhookUrlRefused } from "#src/domain/Errors"

interface RuleRow {
  readonly id: string
  readonly evaluation_id: string
  readonly name: string | null
  readonly filter: EvalRuleFilter
  readonly sampling_rate: number
  readonly webhook_url: string | null
  readonly enabled: boolean
  readonly created_at: Date
  readonly updated_at: Date
  readonly total?: number
}

const RULE_COLUMNS = `id, evaluation_id, name, filter, sampling_rate, webhook_url, enabled, created_at, updated_at`

const toRule = (row: RuleRow): EvalRule => ({
  id: EvalRuleId.make(row.id),
  evaluationId: row.evaluation_id,
  name: row.name,
  filter: row.filter,
  samplingRate: row.sampling_rate,
  webhookUrl: row.webhook_url,
  enabled: row.enabled,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString()
})

interface SubjectRow {
  readonly project_id: string | null
  readonly name: string | null
  readonly status: "running" | "completed" | "failed"
  readonly metadata: Record<string, unknown> | null
  readonly total_cost: string
}

interface DeliveryRow {
  readonly id: string
  readonly delivery_id: string
  readonly rule_id: string
  readonly trace_id: string
  readonly event: string
  readonly attempt: number
  readonly outcome: WebhookDeliveryAttempt["outcome"]
  readonly status_code: number | null
  readonly error: string | null
  readonly duration_ms: number | null
  readonly next_attempt_at: Date | null
  readonly created_at: Date
  readonly total: number
}

/**
 * Eval rules: an evaluation run automatically on the account's traces that become terminal and match a filter,
 * sampled deterministically, with an optional signed webhook once the runs finish. A rule applies at most once
 * to a trace (recorded in `eval_rule_matches`), so a retried terminal-trace job queues nothing twice.
 */
export class EvalRules extends Effect.Service<EvalRules>()("tapedeck/EvalRules", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const evaluations = yield* Evaluations
    const webhooks = yield* WebhookDelivery

    /** A webhook URL whose host is an address (or name) deliveries would refuse is refused at creation. */
    const checkWebhookHost = (url: string) => {
      const host = new URL(url).hostname
      if (isIpLiteral(host)) {
        const verdict = classifyAddress(host, webhooks.guard)
        return verdict.allowed ? undefined : verdict.reason
      }
      return hostNameProblem(host)
    }

    const create = Effect.fn("EvalRules.create")(
      function*(accountId: AccountId, request: CreateEvalRuleRequest) {
        if (request.webhook_url !== undefined) {
          const problem = checkWebhookHost(request.webhook_url)
          if (problem !== undefined) return yield* new WebhookUrlRefused({ reason: problem })
        }
        const visible = yield* sql<{ id: string }>`
          SELECT id FROM evaluations
          WHERE id = ${request.evaluation_id} AND deleted_at IS NULL AND (account_id = ${accountId} OR is_public)`
        if (visible.length === 0) return yield* new RuleEvaluationNotFound({ evaluationId: request.evaluation_id })
        const secret = request.webhook_url === undefined ? undefined : newWebhookSecret()
        const sealed = secret === undefined ? null : yield* Effect.promise(() => webhooks.sealSecret(secret))
        const rows = yield* sql<RuleRow>`
          INSERT INTO eval_rules (id, account_id, evaluation_id, name, filter, sampling_rate, webhook_url, webhook_secret, enabled)
          VALUES (${crypto.randomUUID()}, ${accountId}, ${request.evaluation_id.toLowerCase()}, ${request.name ?? null},
                  ${JSON.stringify(request.filter)}::jsonb, ${request.sampling_rate}, ${request.webhook_url ?? null},
                  ${sealed}, ${request.enabled})
          RETURNING ${sql.unsafe(RULE_COLUMNS)}`
        const rule = toRule(rows[0]!)
        return secret === undefined ? rule : { ...rule, webhookSecret: secret }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const list = Effect.fn("EvalRules.list")(
      function*(accountId: AccountId, limit: number, offset: number) {
        const rows = yield* sql<RuleRow>`
          SELECT ${sql.unsafe(RULE_COLUMNS)}, count(*) OVER ()::int AS total
          FROM eval_rules WHERE account_id = ${accountId} AND deleted_at IS NULL
          ORDER BY created_at DESC, id DESC LIMIT ${limit} OFFSET ${offset}`
        const total = rows[0]?.total ?? (yield* sql<{ total: number }>`
          SELECT count(*)::int AS total FROM eval_rules WHERE account_id = ${accountId} AND deleted_at IS NULL`)[0]?.total ?? 0
        return { items: rows.map(toRule), total, limit, offset }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const get = Effect.fn("EvalRules.get")(
      function*(accountId: AccountId, ruleId: EvalRuleId) {
        const rows = yield* sql<RuleRow>`
          SELECT ${sql.unsafe(RULE_COLUMNS)} FROM eval_rules
          WHERE id = ${ruleId} AND account_id = ${accountId} AND deleted_at IS NULL`
        if (rows[0] === undefined) return yield* new EvalRuleNotFound({ ruleId })
        return toRule(rows[0])
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Soft delete: the rule stops applying and its pending deliveries stop (recorded as gave_up). */
    const remove = Effect.fn("EvalRules.remove")(
      function*(accountId: AccountId, ruleId: EvalRuleId) {
        const rows = yield* sql<{ id: string }>`
          UPDATE eval_rules SET deleted_at = now(), updated_at = now()
          WHERE id = ${ruleId} AND account_id = ${accountId} AND deleted_at IS NULL
          RETURNING id`
        if (rows.length === 0) return yield* new EvalRuleNotFound({ ruleId })
        return { deleted: true as const }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The delivery log of a live rule of the account, newest attempt first. */
    const deliveries = Effect.fn("EvalRules.deliveries")(
      function*(accountId: AccountId, ruleId: EvalRuleId, limit: number, offset: number) {
        yield* get(accountId, ruleId)
        const rows = yield* sql<DeliveryRow>`
          SELECT id, delivery_id, rule_id, trace_id, event, attempt, outcome, status_code, error, duration_ms,
                 next_attempt_at, created_at, count(*) OVER ()::int AS total
          FROM webhook_deliveries WHERE rule_id = ${ruleId} AND account_id = ${accountId}
          ORDER BY created_at DESC, id DESC LIMIT ${limit} OFFSET ${offset}`
        const total = rows[0]?.total ?? (yield* sql<{ total: number }>`
          SELECT count(*)::int AS total FROM webhook_deliveries WHERE rule_id = ${ruleId} AND account_id = ${accountId}`)[0]
          ?.total ?? 0
        const items = rows.map((r): WebhookDeliveryAttempt => ({
          id: r.id,
          deliveryId: r.delivery_id,
          ruleId: EvalRuleId.make(r.rule_id),
          traceId: r.trace_id,
          event: r.event,
          attempt: r.attempt,
          outcome: r.outcome,
          statusCode: r.status_code,
          error: r.error,
          durationMs: r.duration_ms,
          nextAttemptAt: r.next_attempt_at === null ? null : r.next_attempt_at.toISOString(),
          createdAt: r.created_at.toISOString()
        }))
        return { items, total, limit, offset }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * The terminal-trace consumer: applies every enabled rule of the account whose filter matches and whose
     * deterministic sample includes the trace. For each, in one transaction: the (rule, trace) decision is
     * recorded (a second application finds it and stops), the runs are queued, and the webhook job enqueued.
     */
    const apply = Effect.fn("EvalRules.apply")(
      function*(trace: TerminalTrace) {
        const subjects = yield* sql<SubjectRow>`
          SELECT project_id, name, status, metadata, total_cost::text AS total_cost
          FROM traces WHERE id = ${trace.traceId} AND account_id = ${trace.accountId} AND deleted_at IS NULL`
        const subject = subjects[0]
        if (subject === undefined || subject.status === "running") return
        const rules = yield* sql<RuleRow & { readonly account_id: string }>`
          SELECT ${sql.unsafe(RULE_COLUMNS)} FROM eval_rules
          WHERE account_id = ${trace.accountId} AND deleted_at IS NULL AND enabled
          ORDER BY created_at, id`
        const status = subject.status
        const due = rules.filter((rule) =>
          matchesFilter(rule.filter, {
            projectId: subject.project_id,
            name: subject.name,
            status,
            metadata: subject.metadata,
            totalCost: subject.total_cost
          }) &&
          isSampled(rule.sampling_rate, rule.id, trace.traceId)
        )
        for (const rule of due) {
          yield* Effect.gen(function*() {
            const claimed = yield* sql<{ rule_id: string }>`
              INSERT INTO eval_rule_matches (rule_id, trace_id, account_id, sampled)
              VALUES (${rule.id}, ${trace.traceId}, ${trace.accountId}, true)
              ON CONFLICT (rule_id, trace_id) DO NOTHING
              RETURNING rule_id`
            if (claimed.length === 0) return
            const runs = yield* evaluations.queueRuns(trace.accountId, rule.evaluation_id as EvaluationId, [trace.traceId]).pipe(
              Effect.catchTag("EvaluationNotFound", () =>
                Effect.logWarning("eval rule skipped: its evaluation is no longer visible").pipe(
                  Effect.annotateLogs({ ruleId: rule.id, evaluationId: rule.evaluation_id }),
                  Effect.as([] as ReadonlyArray<{ readonly id: string }>)
                ))
            )
            const runIds = runs.map((r) => r.id)
            const deliveryId = rule.webhook_url !== null && runIds.length > 0 ? crypto.randomUUID() : null
            yield* sql`
              UPDATE eval_rule_matches SET run_ids = ${JSON.stringify(runIds)}::jsonb, delivery_id = ${deliveryId}
              WHERE rule_id = ${rule.id} AND trace_id = ${trace.traceId}`
            if (deliveryId !== null) {
              const now = yield* DateTime.now
              const job: WebhookJobPayload = {
                deliveryId,
                ruleId: rule.id,
                traceId: trace.traceId,
                evaluationId: rule.evaluation_id,
                runIds,
                attempt: 1,
                queuedAt: DateTime.toEpochMillis(now),
                polls: 0
              }
              yield* webhooks.schedule(trace.accountId, job, 0)
            }
          }).pipe(sql.withTransaction)
        }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * `apply` for many terminal traces: one statement finds the accounts that have enabled rules, and only their
     * traces are applied (most accounts have none, and a burst of terminal traces then costs one statement).
     */
    const applyMany = Effect.fn("EvalRules.applyMany")(
      function*(traces: ReadonlyArray<TerminalTrace>) {
        if (traces.length === 0) return
        const accounts = [...new Set(traces.map((t) => t.accountId))]
        const withRules = yield* sql<{ account_id: string }>`
          SELECT DISTINCT account_id FROM eval_rules
          WHERE account_id = ANY(${uuidArray(accounts)}::uuid[]) AND deleted_at IS NULL AND enabled`
        const ruled = new Set(withRules.map((r) => r.account_id))
        for (const trace of traces) if (ruled.has(trace.accountId)) yield* apply(trace)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { create, list, get, remove, deliveries, apply, applyMany } as const
  }),
  dependencies: [Evaluations.Default, WebhookDelivery.Default]
}) {}
