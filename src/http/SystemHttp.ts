import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { TapedeckApi } from "../api/Api.ts"
import pkg from "../../package.json" with { type: "json" }

const startedAt = Date.now()

/** The build facts /health reports (each only when configured). */
export const healthBuild = (config: Pick<AppConfig, "commit" | "buildTime" | "deploymentId">) => ({
  ...Option.match(config.commit, { onNone: () => ({}), onSome: (commit) => ({ commit }) }),
  ...Option.match(config.buildTime, { onNone: () => ({}), onSome: (buildTime) => ({ buildTime }) }),
  ...Option.match(config.deploymentId, { onNone: () => ({}), onSome: (deploymentId) => ({ deploymentId }) })
})

/** The body of GET /health at `nowMillis`. */
export const healthBody = (build: ReturnType<typeof healthBuild>, nowMillis: number) => ({
  status: "ok" as const,
  service: "tapedeck-api" as const,
  version: pkg.version,
  ...build,
  timestamp: new Date(nowMillis).toISOString(),
  uptime: Math.max(0, (nowMillis - startedAt) / 1000)
})

export const SystemHttpLive = HttpApiBuilder.group(TapedeckApi, "system", (handlers) =>
  Effect.gen(function* () {
    const build = healthBuild(yield* AppConfig)
    return handlers.handle("health", () =>
      Effect.clockWith((clock) => Effect.map(clock.currentTimeMillis, (now) => healthBody(build, now)))
    )
  })
)
