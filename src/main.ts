import { HttpServer } from "@effect/platform"
import { BunContext, BunHttpServer, BunRuntime } from "@effect/platform-bun"
import { Config, Effect, Layer, Logger, LogLevel } from "effect"
import { StorageLive } from "#layers/storage/Sql"
import { AppLive } from "./http/AppLive.ts"

const ServerLive = BunHttpServer.layerConfig(
  Config.all({
    port: Config.integer("PORT").pipe(Config.withDefault(8080)),
    hostname: Config.string("HOST").pipe(Config.withDefault("0.0.0.0")),
    // Bun's own limit would answer an empty 413 before our handler runs; the API refuses bodies over
    // TAPEDECK_MAX_BODY_BYTES itself (by Content-Length, or while a chunked body streams in) with a 400.
    maxRequestBodySize: Config.succeed(Number.MAX_SAFE_INTEGER),
    idleTimeout: Config.succeed(120)
  })
)

const LoggingLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const level = yield* Config.logLevel("TAPEDECK_LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info))
    const format = yield* Config.literal("logfmt", "json", "pretty")("TAPEDECK_LOG_FORMAT").pipe(
      Config.withDefault("logfmt" as const)
    )
    const logger = format === "json" ? Logger.json : format === "pretty" ? Logger.pretty : Logger.logFmt
    return Layer.merge(logger, Logger.minimumLogLevel(level))
  })
)

AppLive.pipe(
  HttpServer.withLogAddress,
  Layer.provide(StorageLive),
  Layer.provide(ServerLive),
  Layer.provide(BunContext.layer),
  Layer.provide(LoggingLive),
  Layer.launch,
  BunRuntime.runMain({ disablePrettyLogger: true })
)
