import { Schema } from "effect"
import { pageParams } from "./Page.ts"
import { Trace } from "./Trace.ts"
import { required } from "./Described.ts"

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
  id: required(Schema.String, "The session id the traces carry"),
  traceCount: required(Schema.Number, "How many traces the session has"),
  spanCount: required(Schema.Number, "How many spans those traces have"),
  failedTraceCount: required(Schema.Number, "How many of its traces failed"),
  totalTokens: required(Schema.Number, "Tokens over its traces"),
  totalCost: required(Schema.String, "Cost in USD over its traces (decimal string)"),
  firstSeen: Schema.String.annotations({ description: "Earliest trace start" }),
  lastSeen: Schema.String.annotations({ description: "Latest trace end (or start, for a running trace)" })
}).annotations({ identifier: "SessionSummary" })
export type SessionSummary = typeof SessionSummary.Type

export const SessionList = Schema.Struct({
  items: required(Schema.Array(SessionSummary), "This page's sessions, most recently active first"),
  total: required(Schema.Number, "How many sessions there are, over all pages"),
  limit: required(Schema.Number, "The page size asked for"),
  offset: required(Schema.Number, "How many were skipped before this page"),
  hasMore: required(Schema.Boolean, "Another page follows")
}).annotations({ identifier: "SessionList" })

/** GET /api/v1/sessions/{id}: the summary and a page of its traces, oldest first. */
export const SessionDetail = Schema.Struct({
  ...SessionSummary.fields,
  traces: required(Schema.Array(Trace), "A page of the session's traces, oldest first"),
  limit: required(Schema.Number, "The page size asked for"),
  offset: required(Schema.Number, "How many traces were skipped before this page"),
  hasMore: required(Schema.Boolean, "More traces follow")
}).annotations({ identifier: "SessionDetail" })

/** An agent of the session; the root node (`agent_id` null) gathers the spans without an agent id. */
export const AgentNode = Schema.Struct({
  agent_id: required(Schema.NullOr(Schema.String), "The agent's id, or null for the root node"),
  agent_role: required(Schema.NullOr(Schema.String), "The agent's role as its spans give it, or null"),
  root: required(Schema.Boolean, "The root node: spans without an agent id"),
  span_count: required(Schema.Number, "The agent's spans in the session"),
  tokens: required(Schema.Number, "Tokens of those spans"),
  cost: required(Schema.String, "Cost in USD of those spans (decimal string)"),
  errors: required(Schema.Number, "Those spans that recorded an error"),
  first_seen: required(Schema.NullOr(Schema.String), "When its first span started (ISO 8601), or null"),
  last_seen: required(Schema.NullOr(Schema.String), "When its last span ended (ISO 8601), or null")
}).annotations({ identifier: "AgentNode" })
export type AgentNode = typeof AgentNode.Type

/** parent_agent_id → agent_id; `calls` counts the spans where the agent was entered from that parent. */
export const AgentEdge = Schema.Struct({
  parent_agent_id: Schema.NullOr(Schema.String).annotations({ description: "null: the root node" }),
  agent_id: required(Schema.String, "The agent entered"),
  calls: required(Schema.Number, "How many spans entered it from that parent")
}).annotations({ identifier: "AgentEdge" })
export type AgentEdge = typeof AgentEdge.Type

export const SessionGraph = Schema.Struct({
  session_id: required(Schema.String, "The session"),
  nodes: required(Schema.Array(AgentNode), "Its agents"),
  edges: required(Schema.Array(AgentEdge), "Which agent entered which, and how often")
}).annotations({ identifier: "SessionGraph" })
export type SessionGraph = typeof SessionGraph.Type

