import type { Subprocess } from "bun"
import { Effect, Schedule } from "effect"

/** Set in a worker's environment: its index (0-based). The worker listens with SO_REUSEPORT. */
export const WORKER_INDEX_ENV = "TAPEDECK_WORKER_INDEX"

export interface SupervisorOptions {
  readonly workers: number
  readonly port: number
  readonly host: string
  /** The command that starts one worker (this same entry point). */
  readonly command: ReadonlyArray<string>
  /** A worker's drain on SIGTERM (TAPEDECK_DRAIN_SECONDS): it gets 5 s more than that to stop before SIGKILL. */
  readonly drainSeconds: number
}

const log = (level: "info" | "warn" | "error", msg: string) =>
  Effect.sync(() => console.error(`level=${level} msg=${JSON.stringify(`supervisor: ${msg}`)}`))

/** A worker restarted more often than this within a minute means something is wrong: give up. */
const MAX_RESTARTS_PER_MINUTE = 10

/**
 * Runs `workers` copies of the API as child processes on one port (Linux SO_REUSEPORT spreads the
 * connections over them), so one machine's cores all serve requests. Each worker is a full instance: it
 * shares nothing with the others but PostgreSQL, exactly as separate machines would. The first worker starts
 * alone (it runs the migrations); the others follow once it answers /health. A worker that dies is started
 * again; SIGTERM or SIGINT stops them all and waits for them (SIGKILL 5 s after their drain time).
 */
export const superviseWorkers = (options: SupervisorOptions) =>
  Effect.gen(function*() {
    // Every worker must bind the same port: PORT=0 picks one free port for all of them.
    const port = options.port !== 0 ? options.port : yield* Effect.sync(() => {
      const probe = Bun.listen({ hostname: options.host, port: 0, socket: { data() {} } })
      const free = probe.port
      probe.stop(true)
      return free
    })
    const children = new Map<number, Subprocess>()
    const restarts: Array<number> = []
    let stopping = false
    let failed: ((reason: string) => void) | undefined
    const fatal = new Promise<string>((resolve) => (failed = resolve))

    const spawn = (index: number): Subprocess => {
      const child = Bun.spawn({
        cmd: [...options.command],
        env: { ...process.env, PORT: String(port), [WORKER_INDEX_ENV]: String(index) },
        stdin: "ignore",
        stdout: "inherit",
        stderr: "inherit",
        onExit: (_proc, code, signal) => {
          children.delete(index)
          if (stopping) return
          const now = Date.now()
          restarts.push(now)
          while (restarts.length > 0 && restarts[0]! < now - 60_000) restarts.shift()
          if (restarts.length > MAX_RESTARTS_PER_MINUTE) {
            failed?.(`workers exited ${restarts.length} times within a minute (last: worker ${index}, ${signal ?? code})`)
            return
          }
          Effect.runFork(
            log("warn", `worker ${index} exited (${signal ?? code}); starting it again`).pipe(
              Effect.zipRight(Effect.sleep("500 millis")),
              Effect.zipRight(Effect.sync(() => {
                if (!stopping) children.set(index, spawn(index))
              }))
            )
          )
        }
      })
      return child
    }

    const probeHost = options.host === "0.0.0.0" || options.host === "::" ? "127.0.0.1" : options.host
    const healthy = Effect.tryPromise(async () => {
      const res = await fetch(`http://${probeHost.includes(":") ? `[${probeHost}]` : probeHost}:${port}/health`)
      await res.arrayBuffer()
      if (res.status !== 200) throw new Error(`status ${res.status}`)
    })

    // A worker gets its drain time and 5 s to stop by itself (a worker still starting may not get there): then SIGKILL.
    const stopAll = Effect.promise(async () => {
      stopping = true
      const all = [...children.values()]
      for (const child of all) child.kill("SIGTERM")
      const exited = Promise.all(all.map((c) => c.exited))
      const grace = new Promise<"late">((resolve) => setTimeout(() => resolve("late"), (options.drainSeconds + 5) * 1000).unref())
      if ((await Promise.race([exited, grace])) === "late") {
        for (const child of all) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
        await exited
      }
    })

    // SIGTERM/SIGINT interrupt this fiber (BunRuntime.runMain): the finalizer stops the workers and waits.
    // runMain listens for the first signal only; a second one (`bun run` forwarding it, a repeated Ctrl-C) would
    // kill this process mid-stop and orphan the workers, so later signals are absorbed (SIGKILL still ends it).
    const absorb = () => {}
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        process.on("SIGTERM", absorb)
        process.on("SIGINT", absorb)
      }),
      () =>
        Effect.sync(() => {
          process.off("SIGTERM", absorb)
          process.off("SIGINT", absorb)
        })
    )
    yield* Effect.addFinalizer(() =>
      log("info", "stopping the workers").pipe(Effect.zipRight(stopAll))
    )
    yield* log("info", `starting ${options.workers} workers on port ${port}`)
    children.set(0, spawn(0))
    yield* healthy.pipe(
      Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("120 seconds"))),
      Effect.catchAll(() => Effect.sync(() => failed?.("the first worker did not answer /health within 120 s")))
    )
    for (let i = 1; i < options.workers && !stopping; i++) children.set(i, spawn(i))
    const reason = yield* Effect.promise(() => fatal)
    yield* log("error", reason)
    return 1
  }).pipe(Effect.scoped)
