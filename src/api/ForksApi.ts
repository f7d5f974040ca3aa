import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { CreateForkRequest, Fork, ForkList, ForkPath, ListForksParams, ReplayResult } from "../domain/Fork.ts"
import { ReplayAllowanceExhaustedWire, ReplayInProgressWire } from "./ApiErrors.ts"
import { Authentication, RateLimit } from "./Security.ts"

export class ForksApi extends HttpApiGroup.make("forks")
  .add(
    HttpApiEndpoint.get("list", "/forks")
      .setUrlParams(ListForksParams)
      .addSuccess(ForkList)
      .annotate(OpenApi.Summary, "The account's forks, newest first")
  )
  .add(
    HttpApiEndpoint.post("create", "/forks")
      .setPayload(CreateForkRequest)
      .addSuccess(Fork)
      .annotate(OpenApi.Summary, "Branch an owned trace at one of its spans with a new input and mocked tool outputs")
  )
  .add(
    HttpApiEndpoint.get("get", "/forks/:forkId")
      .setPath(ForkPath)
      .addSuccess(Fork)
      .annotate(OpenApi.Summary, "A fork of the account")
  )
  .add(
    HttpApiEndpoint.post("replay", "/forks/:forkId/replay")
      .setPath(ForkPath)
      .addSuccess(ReplayResult)
      .addError(ReplayAllowanceExhaustedWire)
      .addError(ReplayInProgressWire)
      .annotate(OpenApi.Summary, "Replay a fork: a new generation, run on the server (or by a connected SDK)")
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1")
{}
