import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  ListSessionsParams,
  SessionDetail,
  SessionGraph,
  SessionGraphParams,
  SessionList,
  SessionPath,
  SessionTracesParams
} from "../domain/Session.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class SessionsApi extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.get("list", "/sessions")
      .setUrlParams(ListSessionsParams)
      .addSuccess(SessionList)
      .annotate(OpenApi.Summary, "The account's sessions (traces sharing a sessionId), most recently active first")
      .annotate(
        OpenApi.Description,
        "Sessions group the traces that share a `session_id` (a conversation, a user session). Each item has the session's trace count, totals and first and last activity."
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/sessions/:sessionId")
      .setPath(SessionPath)
      .setUrlParams(SessionTracesParams)
      .addSuccess(SessionDetail)
      .annotate(OpenApi.Summary, "A session's totals and a page of its traces, oldest first (URL-encode the id)")
      .annotate(
        OpenApi.Description,
        "The session's totals and its traces in the order they started, paged. Session ids may contain any character: URL-encode them in the path."
      )
  )
  .add(
    HttpApiEndpoint.get("graph", "/sessions/:sessionId/graph")
      .setPath(SessionPath)
      .setUrlParams(SessionGraphParams)
      .addSuccess(SessionGraph)
      .annotate(OpenApi.Summary, "The session's agent topology: agents as nodes, parent_agent_id → agent_id edges")
      .annotate(
        OpenApi.Description,
        "How the agents of a session called each other: one node per agent id with its span count and totals, one edge per parent agent → agent pair seen in the spans."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
