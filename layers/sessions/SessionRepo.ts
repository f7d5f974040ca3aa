import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { type AgentEdge, type AgentNode, type SessionGraph, type SessionSummary } from "#src/domain/Session"
import { TRACE_SELECT, type TraceRow, toTrace } from "../traces/TraceRepo.ts"
import { SessionNotFound } from "#src/domain/Errors"

export type Environment = "production" | "sandbox"

interface SummaryRow {
  readonly id: string
  readonly trace_count: number
  readonly span_count: number
  readonly failed: number
  readonly tokens: number
  readonly cost: string
  readonly first_seen: Date
  readonly last_seen: Date
}

const SUMMARY_COLUMNS = `session_id AS id, count(*)::float8 AS trace_count, COALESCE(sum(span_count), 0)::float8 AS span_count,
  count(*) FILTER (WHERE status = 'failed')::float8 AS failed,
  COALESCE(sum(total_tokens), 0)::float8 AS tokens, COALESCE(sum(total_cost), 0)::text AS cost,
  min(started_at) AS first_seen, max(COALESCE(ended_at, started_at)) AS last_seen`

const toSummary = (row: SummaryRow): SessionSummary => ({
  id: row.id,
  traceCount: row.trace_count,
  spanCount: row.span_count,
  failedTraceCount: row.failed,
  totalTokens: row.tokens,
  totalCost: row.cost,
  firstSeen: row.first_seen.toISOString(),
  lastSeen: row.last_seen.toISOString()
})

interface NodeRow {
  readonly agent_id: string | null
  readonly agent_role: string | null
  readonly span_count: number
  readonly tokens: number
  readonly cost: string
  readonly errors: number
  readonly first_seen: Date
  readonly last_seen: Date
}

/**
 * Sessions: the account's traces grouped by `session_id`, aggregated in SQL. Soft-deleted traces are left
 * out, and a session none of whose traces the account can see is `SessionNotFound`.
 */
export class SessionRepo extends Effect.Service<SessionRepo>()("tapedeck/SessionRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const scope = (accountId: AccountId, environment: Environment) =>
      sql`account_id = ${accountId} AND environment = ${environment} AND deleted_at IS NULL AND session_id IS NOT NULL`

    /** A page of the account's sessions, most recently active first, with the exact total. */
    const list = Effect.fn("SessionRepo.list")(
      function*(accountId: AccountId, environment: Environment, limit: number, offset: number) {
        const [rows, totals] = yield* Effect.all([
          sql<SummaryRow>`
            SELECT ${sql.literal(SUMMARY_COLUMNS)} FROM traces WHERE ${scope(accountId, environment)}
            GROUP BY session_id
            ORDER BY last_seen DESC, session_id
            LIMIT ${limit + 1} OFFSET ${offset}`,
          sql<{ n: number }>`
            SELECT count(DISTINCT session_id)::float8 AS n FROM traces WHERE ${scope(accountId, environment)}`
        ], { concurrency: 2 })
        return {
          items: rows.slice(0, limit).map(toSummary),
          total: totals[0]?.n ?? 0,
          limit,
          offset,
          hasMore: rows.length > limit
        }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    const summary = Effect.fn("SessionRepo.summary")(
      function*(accountId: AccountId, environment: Environment, sessionId: string) {
        const rows = yield* sql<SummaryRow>`
          SELECT ${sql.literal(SUMMARY_COLUMNS)} FROM traces
          WHERE ${scope(accountId, environment)} AND session_id = ${sessionId}
          GROUP BY session_id`
        const row = rows[0]
        if (row === undefined) return yield* new SessionNotFound({ sessionId })
        return toSummary(row)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** The session's summary and a page of its traces, oldest first. */
    const get = Effect.fn("SessionRepo.get")(
      function*(accountId: AccountId, environment: Environment, sessionId: string, limit: number, offset: number) {
        const head = yield* summary(accountId, environment, sessionId)
        const rows = yield* sql<TraceRow>`
          SELECT ${sql.literal(TRACE_SELECT)} FROM traces
          WHERE ${scope(accountId, environment)} AND session_id = ${sessionId}
          ORDER BY started_at, id
          LIMIT ${limit + 1} OFFSET ${offset}`
        return { ...head, traces: rows.slice(0, limit).map(toTrace), limit, offset, hasMore: rows.length > limit }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /**
     * The agent topology of the session. Nodes: one per agent_id over the spans of the session's traces (the
     * root node, agent_id null, takes the spans without one). Edges: parent_agent_id → agent_id, counting the
     * spans where the agent is entered (its parent span belongs to another agent, or it has none); a span
     * without parent_agent_id is entered from its parent span's agent (the root when that has none).
     */
    const graph = Effect.fn("SessionRepo.graph")(
      function*(accountId: AccountId, environment: Environment, sessionId: string) {
        yield* summary(accountId, environment, sessionId)
        const traces = sql`
          SELECT id FROM traces
          WHERE ${scope(accountId, environment)} AND session_id = ${sessionId}`
        const [nodeRows, edgeRows] = yield* Effect.all([
          sql<NodeRow>`
            SELECT s.agent_id,
                   mode() WITHIN GROUP (ORDER BY s.agent_role) AS agent_role,
                   count(*)::float8 AS span_count,
                   COALESCE(sum(COALESCE(s.input_tokens, 0) + COALESCE(s.output_tokens, 0)), 0)::float8 AS tokens,
                   COALESCE(sum(s.cost), 0)::text AS cost,
                   count(*) FILTER (WHERE s.error IS NOT NULL OR s.span_type = 'error')::float8 AS errors,
                   min(s.started_at) AS first_seen,
                   max(COALESCE(s.ended_at, s.started_at)) AS last_seen
            FROM spans s
            WHERE s.trace_id IN (${traces}) AND s.account_id = ${accountId}
            GROUP BY s.agent_id
            ORDER BY min(s.started_at), s.agent_id NULLS FIRST`,
          sql<{ parent_agent_id: string | null; agent_id: string; calls: number }>`
            SELECT COALESCE(s.parent_agent_id, p.agent_id) AS parent_agent_id, s.agent_id, count(*)::float8 AS calls
            FROM spans s
            LEFT JOIN spans p ON p.trace_id = s.trace_id AND p.id = s.parent_id
            WHERE s.trace_id IN (${traces}) AND s.account_id = ${accountId}
              AND s.agent_id IS NOT NULL AND p.agent_id IS DISTINCT FROM s.agent_id
            GROUP BY 1, 2
            ORDER BY 1 NULLS FIRST, 2`
        ], { concurrency: 2 })

        const nodes: Array<AgentNode> = nodeRows.map((row) => ({
          agent_id: row.agent_id,
          agent_role: row.agent_id === null ? null : row.agent_role,
          root: row.agent_id === null,
          span_count: row.span_count,
          tokens: row.tokens,
          cost: row.cost,
          errors: row.errors,
          first_seen: row.first_seen.toISOString(),
          last_seen: row.last_seen.toISOString()
        }))
        const empty = (agentId: string | null): AgentNode => ({
          agent_id: agentId, agent_role: null, root: agentId === null, span_count: 0, tokens: 0, cost: "0",
          errors: 0, first_seen: null, last_seen: null
        })
        // Every edge end is a node: the root always, and parents that have no span of their own in the session.
        if (!nodes.some((n) => n.root)) nodes.unshift(empty(null))
        const known = new Set(nodes.map((n) => n.agent_id))
        for (const edge of edgeRows) {
          if (!known.has(edge.parent_agent_id)) {
            known.add(edge.parent_agent_id)
            nodes.push(empty(edge.parent_agent_id))
          }
        }
        const edges: Array<AgentEdge> = edgeRows.map((e) => ({
          parent_agent_id: e.parent_agent_id,
          agent_id: e.agent_id,
          calls: e.calls
        }))
        return { session_id: sessionId, nodes, edges } satisfies SessionGraph
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { list, get, graph } as const
  })
}) {}
