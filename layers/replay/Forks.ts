import { SqlClient } from "@effect/sql"
import { DateTime, Effect, Either, Option } from "effect"
import type { CreateForkRequest, Fork, ReplayResult } from "#src/domain/Fork"
import type { AccountId, ForkId, TraceId } from "#src/domain/Ids"
import type { TraceDetailWire } from "#src/domain/Trace"
import { ForkId as ForkIdSchema } from "#src/domain/Ids"
import { modelRequests, splitAtForkPoint } from "#src/domain/ReplayPlan"
import { AppConfig } from "../config/AppConfig.ts"
import type { JobHandler } from "../jobs/JobHandlers.ts"
import { JobQueue } from "../jobs/JobQueue.ts"
import { LlmClient } from "../llm/LlmClient.ts"
import { ModelPrices } from "../llm/Prices.ts"
import { TraceRepo } from "../traces/TraceRepo.ts"
import { Traces } from "../traces/Traces.ts"
import { ForkRepo, type StartedGeneration } from "./ForkRepo.ts"
import { SdkReplay } from "./SdkReplay.ts"
import { replayOnServer } from "./ServerReplay.ts"
import { ForkPointNotInTrace, JobFailed, ReplayAlreadyActive, ReplayFailed, ReplayQuotaExceeded, type TraceNotFound } from "#src/domain/Errors"


interface ReplayPlan {
  readonly source: TraceDetailWire | undefined
  /** A live SDK connection of the account that can run the trace's agent. */
  readonly connection: Option.Option<string>
  readonly agent: string | undefined
  readonly short: boolean
}

/** The names a trace's agent may be registered under: metadata.agent, the trace name, root spans' agent_id. */
const agentNamesOf = (trace: TraceDetailWire) => {
  const names = [
    (trace.metadata as { agent?: unknown } | undefined)?.agent,
    trace.name,
    ...trace.spans.filter((s) => s.parent_id === null).map((s) => s.agent_id)
  ]
  return [...new Set(names.filter((n): n is string => typeof n === "string" && n !== ""))]
}

/** The calendar month (UTC) an allowance unit is counted in, e.g. "2026-11". */
const monthOf = (now: DateTime.Utc) => DateTime.formatIso(now).slice(0, 7)

/**
 * Forks of recorded traces and their replays. A replay reserves one unit of the monthly allowance and
 * starts a new generation in one transaction (so of two concurrent requests, on any instances, exactly one
 * wins), then runs on the server and stores the result as a sandbox trace linked to the fork.
 */
export class Forks extends Effect.Service<Forks>()("tapedeck/Forks", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* ForkRepo
    const traces = yield* Traces
    const traceRepo = yield* TraceRepo
    const config = yield* AppConfig
    const jobs = yield* JobQueue
    const llm = yield* LlmClient
    const sdk = yield* SdkReplay
    const prices = yield* ModelPrices

    const create = Effect.fn("Forks.create")(function*(accountId: AccountId, request: CreateForkRequest) {
      const source = yield* traces.get(accountId, request.trace_id)
      if (!source.spans.some((s) => s.id === request.fork_point_span_id.toLowerCase())) {
        return yield* new ForkPointNotInTrace({ spanId: request.fork_point_span_id })
      }
      return yield* repo.insert(accountId, {
        id: ForkIdSchema.make(crypto.randomUUID()),
        traceId: source.id,
        forkPointSpanId: request.fork_point_span_id.toLowerCase(),
        name: request.name ?? null,
        description: request.description ?? null,
        modifiedInput: request.modified_input,
        mockOutputs: request.mock_outputs ?? null
      })
    })

    const get = (accountId: AccountId, forkId: ForkId) => repo.find(accountId, forkId)
    const list = (accountId: AccountId, limit: number, offset: number) => repo.list(accountId, limit, offset)

    /**
     * Reserves the allowance unit and opens the generation, atomically; the work is handed over in the same
     * transaction (a command for the SDK's connection, or a job for a long server replay), so it is never lost
     * between the two.
     */
    const begin = Effect.fn("Forks.begin")(
      function*(accountId: AccountId, forkId: ForkId, plan: ReplayPlan) {
        const fork = yield* repo.find(accountId, forkId, true)
        if (fork.status === "replaying" && !(yield* repo.abandonStale(forkId, config.replayTimeoutSeconds))) {
          return yield* new ReplayAlreadyActive({ forkId })
        }
        const month = monthOf(yield* DateTime.now)
        if (!(yield* repo.reserveUnit(accountId, month, config.replayMonthlyAllowance))) {
          return yield* new ReplayQuotaExceeded({ allowance: config.replayMonthlyAllowance, month })
        }
        const mode: "sdk" | "server" = Option.isSome(plan.connection) && plan.source !== undefined ? "sdk" : "server"
        const started = yield* repo.startGeneration(accountId, fork, mode, month)
        if (mode === "sdk") {
          yield* sdk.enqueue(Option.getOrThrow(plan.connection), {
            type: "replay",
            execution_id: started.executionId,
            agent: plan.agent!,
            fork,
            source_trace: plan.source,
            fork_point_span_id: fork.forkPointSpanId,
            modified_input: fork.modifiedInput,
            mock_outputs: (fork.mockOutputs ?? {}) as Record<string, unknown>,
            model_requests: modelRequests(plan.source!.spans),
            result_trace_id: started.resultTraceId
          })
        } else if (!plan.short) {
          yield* jobs.enqueue(accountId, "fork.replay", { executionId: started.executionId })
        }
        return { fork, started, mode, runInline: mode === "server" && plan.short }
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Runs a started generation on the server and records its outcome; the ReplayResult. */
    /** `source`, when the caller has just read it, saves reading the recorded trace again. */
    const runOnServer = Effect.fn("Forks.runOnServer")(function*(
      accountId: AccountId,
      fork: Fork,
      started: StartedGeneration,
      source?: TraceDetailWire
    ) {
      const read: Effect.Effect<TraceDetailWire, TraceNotFound> = source
        ? Effect.succeed(source)
        : traces.get(accountId, fork.traceId as TraceId)
      const outcome = yield* read.pipe(
        Effect.mapError(() => new ReplayFailed({ reason: `source trace ${fork.traceId} no longer exists`, modelWork: false })),
        Effect.flatMap((source) =>
          replayOnServer({ source, fork, executionId: started.executionId, resultTraceId: started.resultTraceId }).pipe(
            Effect.provideService(LlmClient, llm),
            Effect.provideService(ModelPrices, prices)
          )
        ),
        Effect.either
      )
      if (Either.isLeft(outcome)) {
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* repo.finishGeneration({
            executionId: started.executionId, status: "failed", byteReplayed: 0, faithfulReexec: 0, caveats: [],
            error: outcome.left.reason
          })
          if (!outcome.left.modelWork) yield* repo.refundUnit(accountId, started.month)
        })).pipe(Effect.catchTags({ SqlError: Effect.die }))
        return {
          fork_id: fork.id as ForkId,
          result_trace_id: started.resultTraceId as TraceId,
          status: "failed" as const,
          mode: "server" as const,
          execution_id: started.executionId,
          byte_replayed: 0,
          faithful_reexec: 0,
          fidelity_caveats: [],
          error: outcome.left.reason
        } satisfies ReplayResult
      }
      const result = outcome.right
      yield* sql.withTransaction(Effect.gen(function*() {
        // A result trace is created terminal: downstream processing runs on it like on any other.
        // No cached key to re-check (no liveKey), so never CredentialRevoked.
        yield* traceRepo.insert(accountId, result.trace, crypto.randomUUID(), config.jobMaxAttempts).pipe(
          Effect.catchTag("CredentialRevoked", Effect.die)
        )
        yield* traceRepo.markForkResult(started.resultTraceId as TraceId, fork.id)
        yield* repo.finishGeneration({
          executionId: started.executionId, status: "completed", byteReplayed: result.byteReplayed,
          faithfulReexec: result.faithfulReexec, caveats: result.caveats, error: null
        })
      })).pipe(Effect.catchTags({ SqlError: Effect.die, TraceIdTaken: Effect.die }))
      return {
        fork_id: fork.id as ForkId,
        result_trace_id: started.resultTraceId as TraceId,
        status: "completed" as const,
        mode: "server" as const,
        execution_id: started.executionId,
        byte_replayed: result.byteReplayed,
        faithful_reexec: result.faithfulReexec,
        fidelity_caveats: result.caveats
      } satisfies ReplayResult
    })

    /**
     * How a replay will run: by a connected SDK that registered the trace's agent, else on the server —
     * inline when it has few model calls to make, else as a durable job.
     */
    const planFor = Effect.fn("Forks.planFor")(function*(accountId: AccountId, forkId: ForkId) {
      const fork = yield* repo.find(accountId, forkId)
      const source = yield* traces.get(accountId, fork.traceId as TraceId).pipe(Effect.option)
      if (Option.isNone(source)) return { source: undefined, connection: Option.none<string>(), agent: undefined, short: true } satisfies ReplayPlan
      const agents = agentNamesOf(source.value)
      const connection = yield* sdk.connectionFor(accountId, agents)
      const split = splitAtForkPoint(source.value.spans, fork.forkPointSpanId)
      const calls = split?.after.filter((s) => s.span_type === "llm_call").length ?? 0
      return {
        source: source.value,
        connection,
        agent: agents[0],
        short: calls <= config.replayInlineMaxModelCalls
      } satisfies ReplayPlan
    })

    const replay = Effect.fn("Forks.replay")(function*(accountId: AccountId, forkId: ForkId) {
      const plan = yield* planFor(accountId, forkId)
      const { fork, mode, runInline, started } = yield* begin(accountId, forkId, plan)
      // Once the generation is open it must reach an outcome: a client hanging up does not stop it.
      if (runInline) return yield* Effect.uninterruptible(runOnServer(accountId, fork, started, plan.source))
      return {
        fork_id: fork.id as ForkId,
        result_trace_id: started.resultTraceId as TraceId,
        status: "replaying" as const,
        mode,
        execution_id: started.executionId
      } satisfies ReplayResult
    })

    /** The `fork.replay` job: runs a generation that was handed to the queue, unless it already ended. */
    const runJob = Effect.fn("Forks.runJob")(function*(executionId: string) {
      const generation = yield* repo.findGeneration(executionId)
      if (Option.isNone(generation) || generation.value.status !== "replaying") return
      const { accountId, forkId, generation: number, month, resultTraceId } = generation.value
      const fork = yield* repo.find(accountId as AccountId, forkId as ForkId).pipe(Effect.option)
      if (Option.isNone(fork) || fork.value.executionId !== executionId) return
      yield* runOnServer(accountId as AccountId, fork.value, { executionId, resultTraceId, generation: number, month })
    })

    return { create, get, list, replay, runJob } as const
  }),
  dependencies: [ForkRepo.Default, Traces.Default, TraceRepo.Default, JobQueue.Default, SdkReplay.Default, AppConfig.Default]
}) {}

/** The job handler for `fork.replay`: runs the generation its payload names. */
export const forkReplayHandler = Effect.gen(function*() {
  const forks = yield* Forks
  const handler: JobHandler<"fork.replay"> = (job) => forks.runJob(job.payload.executionId)
  return handler
})
