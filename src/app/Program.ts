import { Effect, Layer, Option, Redacted, Schedule } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { LoggingLive } from "./Server.ts"
import { superviseWorkers, WORKER_INDEX_ENV } from "./Supervisor.ts"

/**
 * Runs a server layer (ServerLive, with or without extensions) as the service: one process, or with
 * TAPEDECK_WORKERS > 1 (with DATABASE_URL): this process supervises that many API processes on one port.
 * Embedded PGlite lives inside one process, so it always runs one.
 */
export const runServer = <E>(server: Layer.Layer<never, E>) => {
  const serve = () => Layer.launch(server)
  return Effect.gen(function* () {
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
      }).pipe(Effect.repeat(Schedule.spaced("1 second")), Effect.forkDaemon)
      return yield* serve()
    }
    if (process.env.MIMALLOC_PURGE_DELAY === undefined) {
      yield* Effect.logInfo(
        "MIMALLOC_PURGE_DELAY is unset: the allocator hands freed memory back to the OS at once, which on some VMs costs " +
          "a third of the server's CPU under load; `npx bun run start` and the Docker image set it to -1 (docs/configuration.md)"
      )
    }
    if (workers <= 1) return yield* serve()
    if (Option.isNone(databaseUrl) || Redacted.value(databaseUrl.value) === "") {
      yield* Effect.logWarning(
        "TAPEDECK_WORKERS needs DATABASE_URL (the embedded database is one process): running one"
      )
      return yield* serve()
    }
    const code = yield* superviseWorkers({
      workers: Math.min(workers, 64),
      port: config.port,
      host: config.host,
      command: [process.execPath, ...process.execArgv, Bun.main],
      drainSeconds: config.drainSeconds
    })
    process.exit(code)
  }).pipe(Effect.provide(AppConfig.Default), Effect.provide(LoggingLive))
}
