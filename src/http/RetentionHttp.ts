import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { RetentionRepo } from "#layers/traces/RetentionRepo"
import type { AccountId } from "../domain/Ids.ts"
import type { RetentionSettings } from "../domain/Retention.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

export const RetentionHttpLive = HttpApiBuilder.group(TapedeckApi, "retention", (handlers) =>
  Effect.gen(function* () {
    const repo = yield* RetentionRepo
    const config = yield* AppConfig
    const settings = (accountId: AccountId) =>
      Effect.map(
        repo.settings(accountId),
        ({ days, projects }): RetentionSettings => ({
          retentionDays: days,
          defaultRetentionDays: config.retentionDays,
          effectiveRetentionDays: days ?? config.retentionDays,
          projects
        })
      )
    return handlers
      .handle("get", () => Effect.flatMap(CurrentPrincipal, ({ accountId }) => settings(accountId)))
      .handle("set", ({ payload }) =>
        Effect.gen(function* () {
          const { accountId } = yield* CurrentPrincipal
          yield* repo.setAccount(accountId, payload.retention_days)
          return yield* settings(accountId)
        })
      )
      .handle("setProject", ({ path, payload }) =>
        Effect.gen(function* () {
          const { accountId } = yield* CurrentPrincipal
          yield* repo.setProject(accountId, path.projectId, payload.retention_days)
          return yield* settings(accountId)
        })
      )
  })
).pipe(Layer.provide(RetentionRepo.Default))
