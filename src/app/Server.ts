import { HttpServer } from "@effect/platform"
import { BunContext, BunHttpServer } from "@effect/platform-bun"
import { Effect, Layer, Logger } from "effect"
import { AppConfig, LoggingConfig } from "#layers/config/AppConfig"
import { StorageLive } from "#layers/storage/Sql"
import { makeLifecycleRoutes } from "#src/http/LifecycleRoutes"
import { healthBuild } from "#src/http/SystemHttp"
import { AppLive } from "./AppLive.ts"
import { OtlpGrpcLive } from "#src/grpc/OtlpGrpc"
import { WORKER_INDEX_ENV } from "./Supervisor.ts"

const serverLive = (config: AppConfig, routes: ReturnType<typeof makeLifecycleRoutes>["routes"]) =>
  BunHttpServer.layer({
    port: config.port,
    hostname: config.host,
    // Bun's own limit would answer an empty 413 before our handler runs; the API refuses bodies over
    // TAPEDECK_MAX_BODY_BYTES itself (by Content-Length, or while a chunked body streams in) with a 400.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    idleTimeout: 120,
    // Several worker processes (TAPEDECK_WORKERS) share the port; the kernel spreads connections over them.
    reusePort: process.env[WORKER_INDEX_ENV] !== undefined,
    routes
  })

export const LoggingLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const { format, level } = yield* LoggingConfig
    const logger = format === "json" ? Logger.json : format === "pretty" ? Logger.pretty : Logger.logFmt
    return Layer.merge(logger, Logger.minimumLogLevel(level))
  })
)

/**
 * One server process as a layer: the port opens first and answers 503 while the app is not served
 * (LifecycleRoutes). Whatever is provided to this layer (extensions: span processors…) reaches the app's services.
 */
export const serverLayer = (config: AppConfig) => {
  const lifecycle = makeLifecycleRoutes(healthBuild(config), config.drainSeconds)
  return Layer.scopedDiscard(lifecycle.lifecycle).pipe(
    // The lifecycle is acquired once the app is served, and released first, while the app still answers.
    // OTLP/gRPC on its own port, in the same build so it shares the ingestion gate and services with the API.
    Layer.provideMerge(Layer.merge(AppLive.pipe(HttpServer.withLogAddress), OtlpGrpcLive)),
    Layer.provide(StorageLive),
    Layer.provide(serverLive(config, lifecycle.routes)),
    Layer.provide(BunContext.layer),
    Layer.provide(LoggingLive)
  )
}

/** The server configured from the environment (AppConfig): what `npm start` runs in each process. */
export const ServerLive = Layer.unwrapEffect(Effect.map(AppConfig, serverLayer)).pipe(Layer.provide(AppConfig.Default))
