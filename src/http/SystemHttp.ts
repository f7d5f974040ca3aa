import { HttpApiBuilder } from "@effect/platform"
import { DateTime, Effect, Option } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { TapedeckApi } from "../api/Api.ts"
import pkg from "../../package.json" with { type: "json" }

const startedAt = Date.now()

export const SystemHttpLive = HttpApiBuilder.group(TapedeckApi, "system", (handlers) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const build = {
      ...Option.match(config.commit, { onNone: () => ({}), onSome: (commit) => ({ commit }) }),
      ...Option.match(config.buildTime, { onNone: () => ({}), onSome: (buildTime) => ({ buildTime }) }),
      ...Option.match(config.deploymentId, { onNone: () => ({}), onSome: (deploymentId) => ({ deploymentId }) })
    }
    return handlers.handle("health", () =>
      Effect.gen(function*() {
        const now = yield* DateTime.now
        return {
          status: "ok" as const,
          service: "tapedeck-api" as const,
          version: pkg.version,
          ...build,
          timestamp: DateTime.formatIso(now),
          uptime: Math.max(0, (DateTime.toEpochMillis(now) - startedAt) / 1000)
        }
      }))
  }))
