import { Schema } from "effect"
import { pageParams } from "./Page.ts"
import { Trace } from "./Trace.ts"

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** A session id as traces carry it (`session_id`, at most 100 characters): a free string, URL-encoded in paths. */
export const SessionId = Schema.String.pipe(
  Schema.minLength(1, { message: () => "a session id is 1 to 100 characters" }),
  Schema.maxLength(100, { message: () => "a session id is 1 to 100 characters" })
)

export const SessionPath = Schema.Struct({ sessionId: SessionId })

const env = { env: Schema.optional(Schema.Literal("sandbox")) }

// No identifier: an identified URL-params schema becomes a $ref that the OpenAPI generator drops.
export const ListSessionsParams = Schema.Struct({ ...pageParams, ...env }).annotations(strict)
export const SessionTracesParams = Schema.Struct({ ...pageParams, ...env }).annotations(strict)
export const SessionGraphParams = Schema.Struct(env).annotations(strict)

/** A session: the account's traces that share a `sessionId`, summed. */
export const SessionSummary = Schema.Struct({
  id: Schema.String,
  traceCount: Schema.Number,
  spanCount: Schema.Number,
  failedTraceCount: Schema.Number,
  totalTokens: Schema.Number,
  totalCost: Schema.String,
  firstSeen: Schema.String.annotations({ description: "Earliest trace start" }),
  lastSeen: Schema.String.annotations({ description: "Latest trace end (or start, for a running trace)" })
}).annotations({ identifier: "SessionSummary" })
export type SessionSummary = typeof SessionSummary.Type

export const SessionList = Schema.Struct({
  items: Schema.Array(SessionSummary),
  total: Schema.Number,
  limit: Schema.Number,
  offset: Schema.Number,
  hasMore: Schema.Boolean
}).annotations({ identifier: "SessionList" })

/** GET /api/v1/sessions/{id}: the summary and a page of its traces, oldest first. */
export const SessionDetail = Schema.Struct({
  ...SessionSummary.fields,
  traces: Schema.Array(Trace),
  limit: Schema.Number,
  offset: Schema.Number,
  hasMore: Schema.Boolean
}).annotations({ identifier: "SessionDetail" })

/** An agent of the session; the root node (`agent_id` null) gathers the spans without an agent id. */
export const AgentNode = Schema.Struct({
  agent_id: Schema.NullOr(Schema.String),
  agent_role: Schema.NullOr(Schema.String),
  root: Schema.Boolean,
  span_count: Schema.Number,
  tokens: Schema.Number,
  cost: Schema.String,
  errors: Schema.Number,
  first_seen: Schema.NullOr(Schema.String),
  last_seen: Schema.NullOr(Schema.String)
}).annotations({ identifier: "AgentNode" })
export type AgentNode = typeof AgentNode.Type

/** parent_agent_id → agent_id; `calls` counts the spans where the agent was entered from that parent. */
export const AgentEdge = Schema.Struct({
  parent_agent_id: Schema.NullOr(Schema.String).annotations({ description: "null: the root node" }),
  agent_id: Schema.String,
  calls: Schema.Number
}).annotations({ identifier: "AgentEdge" })
export type AgentEdge = typeof AgentEdge.Type

export const SessionGraph = Schema.Struct({
  session_id: Schema.String,
  nodes: Schema.Array(AgentNode),
  edges: Schema.Array(AgentEdge)
}).annotations({ identifier: "SessionGraph" })
export type SessionGraph = typeof SessionGraph.Type

/** No trace of the account (not deleted) carries this session id. */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  sessionId: Schema.String
}) {}
