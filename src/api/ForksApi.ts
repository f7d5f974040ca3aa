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
      .annotate(
        OpenApi.Description,
        "Forks created by the caller's account, with their status and latest replay result, newest first; paged with `limit` and `offset`."
      )
  )
  .add(
    HttpApiEndpoint.post("create", "/forks")
      .setPayload(CreateForkRequest)
      .addSuccess(Fork)
      .annotate(OpenApi.Summary, "Branch an owned trace at one of its spans with a new input and mocked tool outputs")
      .annotate(
        OpenApi.Description,
        "Records a branch point: the trace, the span to fork at, the input to use instead of the recorded one, and the outputs to return for named tools instead of running them. Nothing runs until you replay the fork."
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/forks/:forkId")
      .setPath(ForkPath)
      .addSuccess(Fork)
      .annotate(OpenApi.Summary, "A fork of the account")
      .annotate(
        OpenApi.Description,
        "The fork with its status (pending, replaying, completed, failed), replay mode and, once finished, the id of the sandbox trace the replay produced."
      )
  )
  .add(
    HttpApiEndpoint.post("replay", "/forks/:forkId/replay")
      .setPath(ForkPath)
      .addSuccess(ReplayResult)
      .addError(ReplayAllowanceExhaustedWire)
      .addError(ReplayInProgressWire)
      .annotate(OpenApi.Summary, "Replay a fork: a new generation, run on the server (or by a connected SDK)")
      .annotate(
        OpenApi.Description,
        "Starts a new replay generation. When an SDK that registered the trace's agent is connected on /ws/v1/replay, the replay runs there (mode `sdk`, answered as `replaying`); otherwise the server re-runs the recorded model calls from the fork point itself (mode `server`). Each replay uses the monthly allowance (402 once exhausted) and only one generation is active at a time (409)."
      )
  )
  .middleware(RateLimit)
  .middleware(Authentication)
  .prefix("/api/v1") {}
