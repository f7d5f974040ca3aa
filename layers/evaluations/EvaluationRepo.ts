import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { AccountId, TraceId } from "#src/domain/Ids"
import {
  type CriterionScore,
  type Evaluation,
  type EvaluationId,
  type EvaluationRun,
  type EvaluationRunId,
  type RunStatus
} from "#src/domain/Evaluation"
import { uuidArray } from "../storage/SqlArrays.ts"
import { EvaluationNotFound } from "#src/domain/Errors"

const EVALUATION_SELECT = `id, account_id, project_id, name, description, judge_model, criteria, is_public, created_at`

interface EvaluationRow {
  readonly id: string
  readonly account_id: string
  readonly project_id: string | null
  readonly name: string
  readonly description: string | null
  readonly judge_model: string
  readonly criteria: ReadonlyArray<{ name: string; description: string; weight: number }>
  readonly is_public: boolean
  readonly created_at: Date
}

/** An evaluation with its owner (which a caller that is not the owner never sees). */
export interface EvaluationRecord {
  readonly ownerId: AccountId
  readonly evaluation: Evaluation
}

const toRecord = (row: EvaluationRow): EvaluationRecord => ({
  ownerId: row.account_id as AccountId,
  evaluation: {
    id: row.id,
    name: row.name,
    description: row.description,
    projectId: row.project_id,
    judgeModel: row.judge_model,
    criteria: row.criteria,
    isPublic: row.is_public,
    createdAt: row.created_at.toISOString()
  }
})

/** The columns of a run, of the table aliased `r` when `r` is given. */
const runSelect = (r = "") => {
  const p = r === "" ? "" : `${r}.`
  return `${p}id, ${p}evaluation_id, ${p}account_id, ${p}trace_id, ${p}judge_model, ${p}rubric_version, ${p}status,
  ${p}score, ${p}criterion_scores, ${p}reasoning, ${p}input_tokens::float8 AS input_tokens,
  ${p}output_tokens::float8 AS output_tokens, ${p}cost_usd, ${p}error, ${p}created_at, ${p}started_at, ${p}completed_at`
}
const RUN_SELECT = runSelect()

interface RunRow {
  readonly id: string
  readonly evaluation_id: string
  readonly account_id: string
  readonly trace_id: string
  readonly judge_model: string
  readonly rubric_version: string
  readonly status: RunStatus
  readonly score: number | null
  readonly criterion_scores: ReadonlyArray<CriterionScore>
  readonly reasoning: string | null
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cost_usd: number | null
  readonly error: string | null
  readonly created_at: Date
  readonly started_at: Date | null
  readonly completed_at: Date | null
}

export const toRun = (row: RunRow): EvaluationRun => ({
  id: row.id,
  traceId: row.trace_id,
  status: row.status,
  score: row.score,
  criterionScores: row.criterion_scores,
  reasoning: row.reasoning,
  judgeModel: row.judge_model,
  inputTokens: row.input_tokens,
  outputTokens: row.output_tokens,
  costUsd: row.cost_usd,
  error: row.error,
  createdAt: row.created_at.toISOString(),
  completedAt: row.completed_at === null ? null : row.completed_at.toISOString()
})

/** A run being worked on by the job worker, with what judging it needs. */
export interface ClaimedRun {
  readonly runId: EvaluationRunId
  readonly accountId: AccountId
  readonly traceId: TraceId
  readonly judgeModel: string
  /** None when the evaluation was deleted after the run was queued. */
  readonly criteria: Option.Option<ReadonlyArray<{ name: string; description: string; weight: number }>>
}

export interface NewEvaluation {
  readonly id: EvaluationId
  readonly projectId: string | null
  readonly name: string
  readonly description: string | null
  readonly judgeModel: string
  readonly criteria: ReadonlyArray<{ name: string; description: string; weight: number }>
  readonly isPublic: boolean
}

/** How a run ended, as stored. */
export interface RunOutcome {
  readonly status: "completed" | "failed"
  readonly score: number | null
  readonly criterionScores: ReadonlyArray<CriterionScore>
  readonly reasoning: string | null
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUsd: number | null
  readonly error: string | null
}

/**
 * Evaluations and their runs. An evaluation is visible to its owner and, when public, to every account; only
 * its owner deletes it (soft). A run belongs to the account that asked for it and is shown only to that account.
 */
export class EvaluationRepo extends Effect.Service<EvaluationRepo>()("tapedeck/EvaluationRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = Effect.fn("EvaluationRepo.insert")(
      function*(accountId: AccountId, e: NewEvaluation) {
        const rows = yield* sql<EvaluationRow>`
          INSERT INTO evaluations (id, account_id, project_id, name, description, judge_model, criteria, is_public)
          VALUES (${e.id}, ${accountId}, ${e.projectId}, ${e.name}, ${e.description}, ${e.judgeModel},
                  ${JSON.stringify(e.criteria)}::jsonb, ${e.isPublic})
          RETURNING ${sql.literal(EVALUATION_SELECT)}`
        return toRecord(rows[0]!).evaluation
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** An evaluation the account owns or that is public; `EvaluationNotFound` otherwise. */
    const findVisible = Effect.fn("EvaluationRepo.findVisible")(
      function*(accountId: AccountId, evaluationId: EvaluationId) {
        const rows = yield* sql<EvaluationRow>`
          SELECT ${sql.literal(EVALUATION_SELECT)} FROM evaluations
          WHERE id = ${evaluationId} AND deleted_at IS NULL AND (account_id = ${accountId} OR is_public)`
        const row = rows[0]
        if (row === undefined) return yield* new EvaluationNotFound({ evaluationId })
        return toRecord(row)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The evaluations the account can see (its own and public ones), newest first, with the exact total. */
    const list = Effect.fn("EvaluationRepo.list")(
      function*(accountId: AccountId, limit: number, offset: number) {
        const [rows, totals] = yield* Effect.all([
          sql<EvaluationRow>`
            SELECT ${sql.literal(EVALUATION_SELECT)} FROM evaluations
            WHERE deleted_at IS NULL AND (account_id = ${accountId} OR is_public)
            ORDER BY created_at DESC, id DESC LIMIT ${limit} OFFSET ${offset}`,
          sql<{ n: number }>`
            SELECT count(*)::float8 AS n FROM evaluations
            WHERE deleted_at IS NULL AND (account_id = ${accountId} OR is_public)`
        ], { concurrency: 2 })
        return { items: rows.map((r) => toRecord(r).evaluation), total: totals[0]?.n ?? 0, limit, offset }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Soft delete by the owner; `EvaluationNotFound` for anyone else (even when it is public). */
    const softDelete = Effect.fn("EvaluationRepo.softDelete")(
      function*(accountId: AccountId, evaluationId: EvaluationId) {
        const rows = yield* sql`
          UPDATE evaluations SET deleted_at = now()
          WHERE id = ${evaluationId} AND account_id = ${accountId} AND deleted_at IS NULL
          RETURNING id`
        if (rows.length === 0) return yield* new EvaluationNotFound({ evaluationId })
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The account's most recent runs of the evaluation, newest first. */
    const recentRuns = Effect.fn("EvaluationRepo.recentRuns")(
      function*(accountId: AccountId, evaluationId: EvaluationId, limit: number) {
        const rows = yield* sql<RunRow>`
          SELECT ${sql.literal(RUN_SELECT)} FROM evaluation_runs
          WHERE evaluation_id = ${evaluationId} AND account_id = ${accountId}
          ORDER BY created_at DESC, id DESC LIMIT ${limit}`
        return rows.map(toRun)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Of `traceIds`, those that are live traces of the account. */
    const ownedTraceIds = Effect.fn("EvaluationRepo.ownedTraceIds")(
      function*(accountId: AccountId, traceIds: ReadonlyArray<string>) {
        if (traceIds.length === 0) return new Set<string>()
        const rows = yield* sql<{ id: string }>`
          SELECT id FROM traces
          WHERE id = ANY(${uuidArray(traceIds)}::uuid[]) AND account_id = ${accountId} AND deleted_at IS NULL`
        return new Set(rows.map((r) => r.id))
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Inserts queued runs (in the caller's transaction, if any). */
    const insertQueued = Effect.fn("EvaluationRepo.insertQueued")(
      function*(
        accountId: AccountId,
        evaluationId: EvaluationId,
        runs: ReadonlyArray<{ id: string; traceId: string }>,
        judgeModel: string,
        rubricVersion: string
      ) {
        if (runs.length === 0) return
        yield* sql`
          INSERT INTO evaluation_runs (id, evaluation_id, account_id, trace_id, judge_model, rubric_version, status)
          SELECT x.id, ${evaluationId}::uuid, ${accountId}::uuid, x.trace_id, ${judgeModel}::text, ${rubricVersion}::text,
                 'queued'
          FROM jsonb_to_recordset(${JSON.stringify(runs.map((r) => ({ id: r.id, trace_id: r.traceId })))}::jsonb)
            AS x(id uuid, trace_id uuid)`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Moves a queued run (or a running one whose earlier attempt died) to running and returns what judging it
     * needs; None when the run is missing or already finished (a repeated job is a no-op).
     */
    const claimRun = Effect.fn("EvaluationRepo.claimRun")(
      function*(runId: EvaluationRunId) {
        const rows = yield* sql<{
          account_id: string
          trace_id: string
          judge_model: string
          criteria: ReadonlyArray<{ name: string; description: string; weight: number }> | null
        }>`
          UPDATE evaluation_runs r SET status = 'running', started_at = now()
          WHERE r.id = ${runId} AND r.status IN ('queued', 'running')
          RETURNING r.account_id, r.trace_id, r.judge_model,
            (SELECT e.criteria FROM evaluations e WHERE e.id = r.evaluation_id AND e.deleted_at IS NULL) AS criteria`
        const row = rows[0]
        if (row === undefined) return Option.none<ClaimedRun>()
        return Option.some<ClaimedRun>({
          runId,
          accountId: row.account_id as AccountId,
          traceId: row.trace_id as TraceId,
          judgeModel: row.judge_model,
          criteria: Option.fromNullable(row.criteria)
        })
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Records how a running run ended (once: a finished run is left as it is). */
    const finishRun = Effect.fn("EvaluationRepo.finishRun")(
      function*(runId: EvaluationRunId, outcome: RunOutcome) {
        yield* sql`
          UPDATE evaluation_runs SET status = ${outcome.status}, score = ${outcome.score},
            criterion_scores = ${JSON.stringify(outcome.criterionScores)}::jsonb, reasoning = ${outcome.reasoning},
            input_tokens = ${outcome.inputTokens}, output_tokens = ${outcome.outputTokens}, cost_usd = ${outcome.costUsd},
            error = ${outcome.error}, completed_at = now()
          WHERE id = ${runId} AND status IN ('queued', 'running')`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The database's current time (run start times compare with trace times written by other instances). */
    const now = Effect.fn("EvaluationRepo.now")(
      function*() {
        const rows = yield* sql<{ now: Date }>`SELECT now() AS now`
        return rows[0]!.now
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Stores a run the gate judged synchronously, finished; returns it as shown. */
    const insertFinished = Effect.fn("EvaluationRepo.insertFinished")(
      function*(run: {
        readonly id: EvaluationRunId
        readonly accountId: AccountId
        readonly evaluationId: EvaluationId
        readonly traceId: string
        readonly judgeModel: string
        readonly rubricVersion: string
        readonly startedAt: Date
        readonly outcome: RunOutcome
      }) {
        const o = run.outcome
        const rows = yield* sql<RunRow>`
          INSERT INTO evaluation_runs (id, evaluation_id, account_id, trace_id, judge_model, rubric_version, status,
            score, criterion_scores, reasoning, input_tokens, output_tokens, cost_usd, error, created_at, started_at,
            completed_at)
          VALUES (${run.id}, ${run.evaluationId}, ${run.accountId}, ${run.traceId}, ${run.judgeModel},
            ${run.rubricVersion}, ${o.status}, ${o.score}, ${JSON.stringify(o.criterionScores)}::jsonb, ${o.reasoning},
            ${o.inputTokens}, ${o.outputTokens}, ${o.costUsd}, ${o.error}, ${run.startedAt.toISOString()}::timestamptz,
            ${run.startedAt.toISOString()}::timestamptz, now())
          RETURNING ${sql.literal(RUN_SELECT)}`
        return toRun(rows[0]!)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * For each trace, the latest completed run of the account with this evaluation, judge model and rubric
     * version that started after the trace last changed (a run of an older version of the trace is stale).
     */
    const reusableRuns = Effect.fn("EvaluationRepo.reusableRuns")(
      function*(
        accountId: AccountId,
        evaluationId: EvaluationId,
        traceIds: ReadonlyArray<string>,
        judgeModel: string,
        rubricVersion: string
      ) {
        const rows = yield* sql<RunRow>`
          SELECT DISTINCT ON (r.trace_id) ${sql.literal(runSelect("r"))}
          FROM evaluation_runs r JOIN traces t ON t.id = r.trace_id
          WHERE r.evaluation_id = ${evaluationId} AND r.account_id = ${accountId}
            AND r.trace_id = ANY(${uuidArray(traceIds)}::uuid[])
            AND r.judge_model = ${judgeModel} AND r.rubric_version = ${rubricVersion} AND r.status = 'completed'
            AND r.started_at >= t.updated_at
          ORDER BY r.trace_id, r.completed_at DESC, r.id DESC`
        return new Map(rows.map((r) => [r.trace_id, toRun(r)]))
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The account's runs of this evaluation among `runIds`, by id. */
    const findRuns = Effect.fn("EvaluationRepo.findRuns")(
      function*(accountId: AccountId, evaluationId: EvaluationId, runIds: ReadonlyArray<string>) {
        if (runIds.length === 0) return new Map<string, EvaluationRun>()
        const rows = yield* sql<RunRow>`
          SELECT ${sql.literal(RUN_SELECT)} FROM evaluation_runs
          WHERE id = ANY(${uuidArray(runIds)}::uuid[]) AND evaluation_id = ${evaluationId} AND account_id = ${accountId}`
        return new Map(rows.map((r) => [r.id, toRun(r)]))
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return {
      insert,
      findVisible,
      list,
      softDelete,
      recentRuns,
      ownedTraceIds,
      insertQueued,
      claimRun,
      finishRun,
      now,
      insertFinished,
      reusableRuns,
      findRuns
    } as const
  })
}) {}
