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
  )
  .add(
    HttpApiEndpoint.get("get", "/sessions/:sessionId")
      .setPath(SessionPath)
      .setUrlParams(SessionTracesParams)
      .addSuccess(SessionDetail)
      .annotate(OpenApi.Summary, "A session's totals and a page of its traces, oldest first (URL-encode the id)")
  )
  .add(
    HttpApiEndpoint.get("graph", "/sessions/:sessionId/graph")
      .setPath(SessionPath)
      .setUrlParams(SessionGraphParams)
      .addSuccess(SessionGraph)
      .annotate(OpenApi.Summary, "The session's agent topology: agents as nodes, parent_agent_id → agent_id edges")
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
