import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Option } from "effect"
import type { AccountId } from "#src/domain/Ids"
import {
  DELIVERY_HEADER,
  EVENT_HEADER,
  runPollDelayMs,
  SIGNATURE_HEADER,
  webhookBackoffMs,
  type WebhookJobPayload,
  type WebhookPayload
} from "#src/domain/Webhook"
import type { JobKind } from "#src/domain/Jobs"
import { AppConfig } from "../config/AppConfig.ts"
import type { JobHandler } from "../jobs/JobHandlers.ts"
import { AddressBlocked, type GuardOptions, systemResolver } from "./AddressGuard.ts"
import { safePost } from "./SafeFetch.ts"
import { makeSecretBox } from "./SecretBox.ts"
import { sign } from "./Signing.ts"
import { uuidArray } from "../storage/SqlArrays.ts"
import { JobFailed } from "#src/domain/Errors"

interface RuleRow {
  readonly webhook_url: string | null
  readonly webhook_secret: string | null
  readonly deleted: boolean
}

interface RunRow {
  readonly id: string
  readonly status: string
  readonly score: number | null
}

type Outcome = "succeeded" | "failed" | "blocked" | "gave_up"

const MAX_REDIRECTS = 3
const KIND = "webhook.deliver" satisfies JobKind

/** A UUID (version 8, RFC 9562) fixed by one step of one delivery: its attempt and how many waits preceded it. */
export const stepJobId = (payload: Pick<WebhookJobPayload, "deliveryId" | "attempt" | "polls">) => {
  const hex = createHash("sha256")
    .update(`${KIND}:${payload.deliveryId.toLowerCase()}:${payload.attempt}:${payload.polls}`)
    .digest("hex")
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

/**
 * Eval-rule webhooks on the durable job queue. A `webhook.deliver` job waits (re-scheduling itself) until the
 * rule's evaluation runs are finished, then POSTs the signed payload through `safePost`. Every attempt is
 * recorded in `webhook_deliveries`; a failed attempt schedules the next one after `webhookBackoffMs`, in the
 * same transaction as its record, up to TAPEDECK_WEBHOOK_MAX_ATTEMPTS. A refused address is not retried.
 * A step whose job runs again (the job queue is at-least-once) finds its attempt recorded and does nothing; only
 * a worker dying between the POST and its record repeats a POST, with the same Tapedeck-Delivery id.
 */
export class WebhookDelivery extends Effect.Service<WebhookDelivery>()("tapedeck/WebhookDelivery", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const box = makeSecretBox(config.webhookSecretKey)
    const guard: GuardOptions = { allowLoopback: config.webhookAllowLoopbackForTests }
    if (guard.allowLoopback) {
      yield* Effect.logWarning(
        "TAPEDECK_WEBHOOK_ALLOW_LOOPBACK_FOR_TESTS is set: webhooks may reach LOOPBACK addresses. TEST-ONLY; never set it in production."
      )
    }
    if (!box.encrypted) {
      yield* Effect.logInfo("webhook signing secrets are stored unencrypted: set TAPEDECK_WEBHOOK_SECRET_KEY to seal them")
    }
    const extraCa = Option.isSome(config.webhookCaFile) ? readFileSync(config.webhookCaFile.value, "utf8") : undefined

    /**
     * Inserts the `webhook.deliver` job of one step of a delivery, due after `delayMs` (in the caller's transaction,
     * if any). The job id is a function of (delivery, attempt, poll), so a step whose job runs twice (its worker
     * died before the job was recorded done) schedules its successor once.
     */
    const schedule = Effect.fn("WebhookDelivery.schedule")(
      function*(accountId: AccountId, payload: WebhookJobPayload, delayMs: number) {
        yield* sql`
          INSERT INTO jobs (id, account_id, kind, payload, status, max_attempts, run_at)
          VALUES (${stepJobId(payload)}, ${accountId}, ${KIND}, ${JSON.stringify(payload)}::jsonb,
                  'queued', ${config.jobMaxAttempts}, now() + make_interval(secs => ${delayMs / 1000}))
          ON CONFLICT (id) DO NOTHING`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const record = (
      accountId: AccountId,
      job: WebhookJobPayload,
      event: string,
      outcome: Outcome,
      detail: { statusCode?: number; error?: string; durationMs?: number; nextDelayMs?: number }
    ) =>
      sql`
        INSERT INTO webhook_deliveries (id, account_id, rule_id, delivery_id, trace_id, event, attempt, outcome,
                                        status_code, error, duration_ms, next_attempt_at)
        VALUES (${crypto.randomUUID()}, ${accountId}, ${job.ruleId}, ${job.deliveryId}, ${job.traceId}, ${event},
                ${job.attempt}, ${outcome}, ${detail.statusCode ?? null}, ${detail.error?.slice(0, 2000) ?? null},
                ${detail.durationMs ?? null},
                ${detail.nextDelayMs === undefined ? null : new Date(Date.now() + detail.nextDelayMs).toISOString()}::timestamptz)`

    /** One step of a delivery: wait for the runs, or make one attempt (and schedule the next on failure). */
    const deliver = Effect.fn("WebhookDelivery.deliver")(
      function*(accountId: AccountId, job: WebhookJobPayload) {
        yield* Effect.annotateCurrentSpan({ "webhook.delivery_id": job.deliveryId, "webhook.attempt": job.attempt })
        // A job run again after its attempt was recorded (and its successor scheduled with it) has nothing to do.
        const recorded = yield* sql`
          SELECT 1 FROM webhook_deliveries
          WHERE delivery_id = ${job.deliveryId} AND attempt = ${job.attempt} AND account_id = ${accountId} LIMIT 1`
        if (recorded.length > 0) return
        const rules = yield* sql<RuleRow>`
          SELECT webhook_url, webhook_secret, deleted_at IS NOT NULL AS deleted
          FROM eval_rules WHERE id = ${job.ruleId} AND account_id = ${accountId}`
        const rule = rules[0]
        if (rule === undefined || rule.deleted || rule.webhook_url === null || rule.webhook_secret === null) {
          yield* record(accountId, job, "evaluation.completed", "gave_up", { error: "the eval rule was deleted" })
          return
        }
        const runs = job.runIds.length === 0 ? [] : yield* sql<RunRow>`
          SELECT id, status, score FROM evaluation_runs
          WHERE id = ANY(${uuidArray(job.runIds)}::uuid[]) AND account_id = ${accountId}`
        const byId = new Map(runs.map((r) => [r.id, r]))
        const finished = job.runIds.every((id) => {
          const run = byId.get(id)
          return run === undefined || run.status === "completed" || run.status === "failed"
        })
        const now = yield* DateTime.now
        const nowMs = DateTime.toEpochMillis(now)
        if (!finished && nowMs < job.queuedAt + config.webhookRunWaitSeconds * 1000) {
          yield* schedule(accountId, { ...job, polls: job.polls + 1 }, runPollDelayMs(job.polls))
          return
        }
        const event = finished ? "evaluation.completed" as const : "evaluation.incomplete" as const
        const payload: WebhookPayload = {
          event,
          delivery_id: job.deliveryId,
          rule_id: job.ruleId,
          evaluation_id: job.evaluationId,
          trace_id: job.traceId,
          runs: job.runIds.map((id) => {
            const run = byId.get(id)
            return { id, status: run?.status ?? "deleted", score: run?.score ?? null }
          }),
          delivered_at: DateTime.formatIso(now)
        }
        const body = JSON.stringify(payload)
        const secret = yield* Effect.tryPromise(() => box.open(rule.webhook_secret!)).pipe(Effect.either)
        if (secret._tag === "Left") {
          yield* record(accountId, job, event, "gave_up", { error: String((secret.left.error as Error)?.message ?? secret.left) })
          return
        }
        const timestamp = Math.floor(nowMs / 1000)
        const signature = yield* Effect.promise(() => sign(secret.right, timestamp, body))
        const started = performance.now()
        const result = yield* Effect.tryPromise({
          try: () =>
            safePost(
              {
                url: rule.webhook_url!,
                headers: { [SIGNATURE_HEADER]: signature, [EVENT_HEADER]: event, [DELIVERY_HEADER]: job.deliveryId },
                body
              },
              { resolver: systemResolver, guard, timeoutMs: config.webhookTimeoutMs, maxRedirects: MAX_REDIRECTS, extraCa }
            ),
          catch: (e) => e
        }).pipe(Effect.either)
        const durationMs = Math.round((performance.now() - started) * 10) / 10
        if (result._tag === "Right" && result.right.status >= 200 && result.right.status < 300) {
          yield* record(accountId, job, event, "succeeded", { statusCode: result.right.status, durationMs })
          return
        }
        if (result._tag === "Left" && result.left instanceof AddressBlocked) {
          yield* record(accountId, job, event, "blocked", { error: `refused: ${result.left.message}`, durationMs })
          return
        }
        const error = result._tag === "Right"
          ? `the endpoint answered ${result.right.status}`
          : result.left instanceof Error ? result.left.message : String(result.left)
        const statusCode = result._tag === "Right" ? result.right.status : undefined
        const retry = job.attempt < config.webhookMaxAttempts
        const nextDelayMs = retry ? webhookBackoffMs(config.webhookBackoffMs, job.attempt) : undefined
        yield* Effect.gen(function*() {
          yield* record(accountId, job, event, "failed", {
            error: retry ? error : `${error}; giving up after ${job.attempt} attempts`,
            durationMs,
            ...(statusCode === undefined ? {} : { statusCode }),
            ...(nextDelayMs === undefined ? {} : { nextDelayMs })
          })
          if (nextDelayMs !== undefined) yield* schedule(accountId, { ...job, attempt: job.attempt + 1 }, nextDelayMs)
        }).pipe(sql.withTransaction)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The `webhook.deliver` job handler. */
    const handler: JobHandler<"webhook.deliver"> = (job) => deliver(job.accountId, job.payload)

    return { schedule, deliver, handler, sealSecret: box.seal, secretsEncrypted: box.encrypted, guard } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
