import { HttpServer } from "@effect/platform"
import { BunContext, BunHttpServer, BunRuntime } from "@effect/platform-bun"
import { Effect, Layer, Logger, Option, Redacted, Schedule } from "effect"
import { AppConfig, LoggingConfig } from "#layers/config/AppConfig"
import { StorageLive } from "#layers/storage/Sql"
import { AppLive } from "./AppLive.ts"
import { OtlpGrpcLive } from "#src/grpc/OtlpGrpc"
import { makeLifecycleRoutes } from "#src/http/LifecycleRoutes"
import { healthBuild } from "#src/http/SystemHttp"
import { superviseWorkers, WORKER_INDEX_ENV } from "./Supervisor.ts"

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

const LoggingLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const { format, level } = yield* LoggingConfig
    const logger = format === "json" ? Logger.json : format === "pretty" ? Logger.pretty : Logger.logFmt
    return Layer.merge(logger, Logger.minimumLogLevel(level))
  })
)

/** The service until it stops; the port opens first and answers 503 while the app is not served (LifecycleRoutes). */
const serve = (config: AppConfig) => {
  const lifecycle = makeLifecycleRoutes(healthBuild(config), config.drainSeconds)
  return Layer.scopedDiscard(lifecycle.lifecycle).pipe(
    // The lifecycle is acquired once the app is served, and released first, while the app still answers.
    // OTLP/gRPC on its own port, in the same build so it shares the ingestion gate and services with the API.
    Layer.provideMerge(Layer.merge(AppLive.pipe(HttpServer.withLogAddress), OtlpGrpcLive)),
    Layer.provide(StorageLive),
    Layer.provide(serverLive(config, lifecycle.routes)),
    Layer.provide(BunContext.layer),
    Layer.provide(LoggingLive),
    Layer.launch
  )
}

/**
 * TAPEDECK_WORKERS > 1 (with DATABASE_URL): this process supervises that many API processes on one port.
 * Embedded PGlite lives inside one process, so it always runs one.
 */
const main = Effect.gen(function*() {
  const config = yield* AppConfig
  const { databaseUrl, workers } = config
  if (process.env[WORKER_INDEX_ENV] !== undefined) {
    // A worker whose supervisor died (SIGKILL, a crash) is reparented: it stops instead of serving unsupervised.
    const parent = process.ppid
    yield* Effect.sync(() => {
      if (process.ppid === parent) return
      process.kill(process.pid, "SIGTERM")
      // Nobody is left to kill it: a graceful stop that hangs must not leave it serving unsupervised.
      setTimeout(() => process.exit(1), 10_000).unref()
    }).pipe(
      Effect.repeat(Schedule.spaced("1 second")),
      Effect.forkDaemon
    )
    return yield* serve(config)
  }
  if (process.env.MIMALLOC_PURGE_DELAY === undefined) {
    yield* Effect.logInfo(
      "MIMALLOC_PURGE_DELAY is unset: the allocator hands freed memory back to the OS at once, which on some VMs costs " +
        "a third of the server's CPU under load; `npx bun run start` and the Docker image set it to -1 (docs/configuration.md)"
    )
  }
  if (workers <= 1) return yield* serve(config)
  if (Option.isNone(databaseUrl) || Redacted.value(databaseUrl.value) === "") {
    yield* Effect.logWarning("TAPEDECK_WORKERS needs DATABASE_URL (the embedded database is one process): running one")
    return yield* serve(config)
  }
  const code = yield* superviseWorkers({
    workers: Math.min(workers, 64),
    port: config.port,
    host: config.host,
    command: [process.execPath, ...process.execArgv, Bun.main],
    drainSeconds: config.drainSeconds
  })
  process.exit(code)
})

main.pipe(Effect.provide(AppConfig.Default), Effect.provide(LoggingLive), BunRuntime.runMain({ disablePrettyLogger: true }))
