import { SqlClient } from "@effect/sql"
import { Effect, Option, Schedule } from "effect"
import type { AccountId } from "#src/domain/Ids"
import type { ReplayCommand } from "#src/domain/ReplayProtocol"
import { AppConfig } from "../config/AppConfig.ts"
import { uuidArray } from "../storage/SqlArrays.ts"

/** How long a connection may go without a heartbeat before it counts as gone. */
const STALE_SECONDS = 15
/** Delivery ticks (100 ms each) between two heartbeats of the connections an instance holds: 3 s. */
const HEARTBEAT_TICKS = 30

const textArray = (values: ReadonlyArray<string>) =>
  `{${values.map((v) => `"${v.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`).join(",")}}`

export interface SdkOutcome {
  readonly executionId: string
  readonly status: "completed" | "failed"
  readonly error: string | null
  readonly byteReplayed: number
  readonly faithfulReexec: number
  readonly caveats: ReadonlyArray<string>
}

/**
 * SDK-mode replay: the registry of connected SDK processes (in PostgreSQL, so a replay requested on one
 * instance reaches an SDK connected to another), the commands waiting for them, and the sweeper that fails
 * (and refunds) a generation whose SDK went away for longer than the grace period. Each instance delivers
 * the commands of the sockets it holds.
 */
export class SdkReplay extends Effect.Service<SdkReplay>()("tapedeck/SdkReplay", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const instanceId = crypto.randomUUID()
    const sockets = new Map<string, (text: string) => Effect.Effect<void>>()

    const open = Effect.fn("SdkReplay.open")(
      function* (accountId: AccountId, connectionId: string, send: (text: string) => Effect.Effect<void>) {
        sockets.set(connectionId, send)
        yield* sql`INSERT INTO sdk_connections (id, account_id, instance_id) VALUES (${connectionId}, ${accountId}, ${instanceId})`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const close = Effect.fn("SdkReplay.close")(
      function* (connectionId: string) {
        sockets.delete(connectionId)
        yield* sql`UPDATE sdk_connections SET closed_at = now() WHERE id = ${connectionId}`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const register = Effect.fn("SdkReplay.register")(
      function* (connectionId: string, agents: ReadonlyArray<string>) {
        yield* sql`UPDATE sdk_connections SET agents = ${textArray(agents)}::text[], last_seen_at = now() WHERE id = ${connectionId}`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** A live connection of the account that registered one of these agents (the most recently seen). */
    const connectionFor = Effect.fn("SdkReplay.connectionFor")(
      function* (accountId: AccountId, agents: ReadonlyArray<string>) {
        if (agents.length === 0) return Option.none<string>()
        const rows = yield* sql<{ id: string }>`
          SELECT id FROM sdk_connections
          WHERE account_id = ${accountId} AND closed_at IS NULL
            AND last_seen_at > now() - make_interval(secs => ${STALE_SECONDS})
            AND agents && ${textArray(agents)}::text[]
          ORDER BY last_seen_at DESC LIMIT 1`
        return Option.fromNullable(rows[0]?.id)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Queues the command for the connection, in the caller's transaction. */
    const enqueue = Effect.fn("SdkReplay.enqueue")(
      function* (connectionId: string, command: ReplayCommand) {
        yield* sql`UPDATE replay_generations SET connection_id = ${connectionId} WHERE execution_id = ${command.execution_id}`
        yield* sql`
          INSERT INTO replay_commands (execution_id, connection_id, payload, status)
          VALUES (${command.execution_id}, ${connectionId}, ${JSON.stringify(command)}::jsonb, 'pending')`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Rebinds executions the reconnected SDK is still running to its new connection. */
    const resume = Effect.fn("SdkReplay.resume")(
      function* (accountId: AccountId, connectionId: string, executionIds: ReadonlyArray<string>) {
        if (executionIds.length === 0) return
        yield* sql`
          UPDATE replay_generations SET connection_id = ${connectionId}
          WHERE execution_id = ANY(${uuidArray(executionIds)}::uuid[]) AND account_id = ${accountId}
            AND status = 'replaying' AND mode = 'sdk'`
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * Ends a generation once (whoever gets there first: the SDK's report or the sweeper). A failed one whose
     * result trace was never stored gives its allowance unit back. The number of generations ended (0 or 1).
     */
    const finish = Effect.fn("SdkReplay.finish")(
      function* (accountId: AccountId, outcome: SdkOutcome, connectionId?: string) {
        const ended = yield* sql<{ forkId: string; resultTraceId: string; month: string }>`
          UPDATE replay_generations SET status = ${outcome.status}, error = ${outcome.error},
                 byte_replayed = ${outcome.byteReplayed}, faithful_reexec = ${outcome.faithfulReexec},
                 fidelity_caveats = ${JSON.stringify(outcome.caveats)}::jsonb, finished_at = now()
          WHERE execution_id = ${outcome.executionId} AND account_id = ${accountId} AND status = 'replaying'
            AND mode = 'sdk' ${connectionId === undefined ? sql`` : sql`AND connection_id = ${connectionId}`}
          RETURNING fork_id AS "forkId", result_trace_id AS "resultTraceId", usage_month AS month`
        const generation = ended[0]
        if (generation === undefined) return 0
        yield* sql`
          UPDATE forks SET status = ${outcome.status}, error = ${outcome.error}, updated_at = now()
          WHERE execution_id = ${outcome.executionId} AND status = 'replaying'`
        const linked = yield* sql`
          UPDATE traces SET fork_id = ${generation.forkId}, environment = 'sandbox'
          WHERE id = ${generation.resultTraceId} AND account_id = ${accountId}
          RETURNING id`
        if (outcome.status === "failed" && linked.length === 0) {
          yield* sql`
            UPDATE replay_usage SET used = GREATEST(0, used - 1)
            WHERE account_id = ${accountId} AND month = ${generation.month}`
        }
        return 1
      },
      (effect) => sql.withTransaction(effect),
      Effect.catchTags({ SqlError: Effect.die })
    )

    // Delivery of the pending commands of the sockets this instance holds (every 100 ms), and their heartbeat
    // (every HEARTBEAT_TICKS of those, well within STALE_SECONDS).
    let tick = 0
    const deliver = Effect.gen(function* () {
      if (sockets.size === 0) return
      const ids = uuidArray(sockets.keys())
      if (tick++ % HEARTBEAT_TICKS === 0) {
        yield* sql`UPDATE sdk_connections SET last_seen_at = now() WHERE id = ANY(${ids}::uuid[])`
      }
      const commands = yield* sql<{ connectionId: string; payload: unknown }>`
        UPDATE replay_commands SET status = 'sent', sent_at = now()
        WHERE connection_id = ANY(${ids}::uuid[]) AND status = 'pending'
        RETURNING connection_id AS "connectionId", payload`
      for (const command of commands) {
        const send = sockets.get(command.connectionId)
        if (send) yield* send(JSON.stringify(command.payload))
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("replay command delivery failed", cause)))

    // Generations whose SDK is gone (closed, or silent) for longer than the grace period fail.
    const sweep = Effect.gen(function* () {
      const lost = yield* sql<{ executionId: string; accountId: AccountId }>`
        SELECT g.execution_id AS "executionId", g.account_id AS "accountId"
        FROM replay_generations g LEFT JOIN sdk_connections c ON c.id = g.connection_id
        WHERE g.status = 'replaying' AND g.mode = 'sdk'
          AND (c.id IS NULL OR COALESCE(c.closed_at, c.last_seen_at + make_interval(secs => ${STALE_SECONDS}))
                 < now() - make_interval(secs => ${config.replaySdkGraceSeconds}))`
      for (const { accountId, executionId } of lost) {
        yield* finish(accountId, {
          executionId,
          status: "failed",
          error: "the SDK running this replay disconnected and did not come back",
          byteReplayed: 0,
          faithfulReexec: 0,
          caveats: []
        })
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("replay sweep failed", cause)))

    yield* deliver.pipe(Effect.repeat(Schedule.spaced("100 millis")), Effect.forkScoped)
    yield* sweep.pipe(Effect.repeat(Schedule.spaced("1 second")), Effect.forkScoped)

    return { open, close, register, connectionFor, enqueue, resume, finish } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
