import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { RetentionProjectPath, RetentionSettings, SetRetentionRequest } from "../domain/Retention.ts"
import { Authentication, RateLimit } from "./Security.ts"

/** How long the account's traces are kept: its own setting, per project, and the configured default. */
export class RetentionApi extends HttpApiGroup.make("retention")
  .add(
    HttpApiEndpoint.get("get", "/retention")
      .addSuccess(RetentionSettings)
      .annotate(
        OpenApi.Summary,
        "How long the account's traces are kept: its setting, the default, and per-project overrides"
      )
      .annotate(
        OpenApi.Description,
        "Traces older than their retention (counted from their start) are purged in the background with everything that hangs off them. A project's override wins over the account's setting, which wins over TAPEDECK_RETENTION_DAYS; with none of them, traces are kept until deleted."
      )
  )
  .add(
    HttpApiEndpoint.put("set", "/retention")
      .setPayload(SetRetentionRequest)
      .addSuccess(RetentionSettings)
      .annotate(OpenApi.Summary, "Set the account's retention in days (null: the configured default)")
      .annotate(
        OpenApi.Description,
        "Applies to the account's traces without a project override; the next purge (every TAPEDECK_RETENTION_INTERVAL_SECONDS) removes the traces that started longer ago."
      )
  )
  .add(
    HttpApiEndpoint.put("setProject", "/retention/projects/:projectId")
      .setPath(RetentionProjectPath)
      .setPayload(SetRetentionRequest)
      .addSuccess(RetentionSettings)
      .annotate(OpenApi.Summary, "Set a project's retention in days (null: removes the override)")
      .annotate(
        OpenApi.Description,
        "Traces whose projectId is this project are kept this many days, whatever the account's setting."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
