import { afterAll, describe, expect, test } from "bun:test"
import { readdirSync, readFileSync } from "node:fs"
import { createTestDatabase, type TestDatabase } from "../support/Database.ts"

// TAPEDECK_WORKERS: `bun run start` as a user runs it, supervising several API processes on one port.
const root = new URL("../..", import.meta.url).pathname
const KEY = "svc_workers_test_key_0123456789"
const dbs: Array<TestDatabase> = []
afterAll(async () => {
  for (const db of dbs) await db.drop()
})

/** The fields of /proc/PID/stat after the command name (state, ppid, …), or undefined once the process is gone. */
const statOf = (pid: number | string) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined
  }
}

/** The pids of a process's children (Linux /proc). */
const childrenOf = (pid: number) =>
  readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e) && Number(statOf(e)?.[1]) === pid)
    .map(Number)

/** A process's state letter (R, S, Z…), or "gone". */
const stateOf = (pid: number) => statOf(pid)?.[0] ?? "gone"

/** Polls `probe` every 100 ms until it returns a value; fails with `what()` (it can include the output so far). */
const until = async <A>(
  probe: () => A | undefined | Promise<A | undefined>,
  options: { readonly timeoutMs: number; readonly what: () => string }
): Promise<A> => {
  const deadline = Date.now() + options.timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what()}`)
    await Bun.sleep(100)
  }
}

const start = async (env: Record<string, string>) => {
  const base: Record<string, string> = { ...process.env } as Record<string, string>
  delete base.DATABASE_URL
  const child = Bun.spawn([process.execPath, "run", "start"], {
    cwd: root,
    env: {
      ...base,
      ...env,
      PORT: "0",
      HOST: "127.0.0.1",
      TAPEDECK_API_KEYS: `workers=${KEY}`,
      TAPEDECK_LOG_LEVEL: "Info"
    },
    stdout: "pipe",
    stderr: "pipe"
  })
  let output = ""
  const decoder = new TextDecoder()
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream) output += decoder.decode(chunk)
  }
  void pump(child.stdout)
  void pump(child.stderr)
  const url = await until(
    async () => {
      const match = /Listening on http:\/\/[^:]+:(\d+)/.exec(output)
      if (!match) return undefined
      const url = `http://127.0.0.1:${match[1]}`
      const res = await fetch(`${url}/health`).catch(() => undefined)
      return res?.status === 200 ? url : undefined
    },
    { timeoutMs: 90_000, what: () => `a healthy server:\n${output}` }
  )
  return { child, url, output: () => output }
}

describe("TAPEDECK_WORKERS", () => {
  test.skipIf(!process.env.TEST_DATABASE_URL)(
    "supervises N API processes on one port, restarts a dead one, stops them all",
    async () => {
      const db = await createTestDatabase()
      dbs.push(db)
      const { child, url, output } = await start({ ...db.env, TAPEDECK_WORKERS: "2" })
      try {
        const workers = await until(
          () => {
            const pids = childrenOf(child.pid).flatMap(childrenOf) // `bun run` → supervisor → workers
            return pids.length === 2 ? pids : undefined
          },
          { timeoutMs: 60_000, what: () => `two workers:\n${output()}` }
        )

        // Every worker serves the API over the same database: a trace written through one is read through any.
        const id = crypto.randomUUID()
        const created = await fetch(`${url}/api/v1/traces`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-service-key": KEY },
          body: JSON.stringify({ id, status: "completed", started_at: new Date().toISOString(), spans: [] })
        })
        expect(`${created.status} ${await created.text()}`).toStartWith("200 ")
        for (let i = 0; i < 20; i++) {
          const res = await fetch(`${url}/api/v1/traces/${id}`, { headers: { "x-service-key": KEY } })
          expect(res.status).toBe(200)
        }

        // A worker killed outright is started again.
        process.kill(workers[0]!, "SIGKILL")
        await until(
          () => {
            const pids = childrenOf(child.pid).flatMap(childrenOf)
            return pids.length === 2 && !pids.includes(workers[0]!) ? pids : undefined
          },
          { timeoutMs: 60_000, what: () => `a replacement worker:\n${output()}` }
        )
        expect(output()).toContain(`worker 0 exited (SIGKILL); starting it again`)
        await until(async () => (await fetch(`${url}/health`).catch(() => undefined))?.status === 200 || undefined, {
          timeoutMs: 60_000,
          what: () => "health after the restart"
        })
      } finally {
        const supervisor = childrenOf(child.pid)[0]
        const all = supervisor === undefined ? [] : childrenOf(supervisor)
        child.kill("SIGTERM")
        // Twice, as `bun run` forwarding the signal does: the second must not cut the supervisor's stop short.
        if (supervisor !== undefined) for (let i = 0; i < 2; i++) process.kill(supervisor, "SIGTERM")
        await child.exited
        // No worker outlives the supervisor (an exited process not yet reaped, state Z, has stopped).
        await until(() => all.every((pid) => ["gone", "Z"].includes(stateOf(pid))) || undefined, {
          timeoutMs: 30_000,
          what: () => `the workers to stop (${all.map((pid) => `${pid}: ${stateOf(pid)}`).join(", ")}):\n${output()}`
        })
      }
    },
    180_000
  )

  test.skipIf(!!process.env.TEST_DATABASE_URL)(
    "with the embedded database, runs one process and says why",
    async () => {
      const dir = `memory://`
      const { child, url, output } = await start({ TAPEDECK_DATA_DIR: dir, TAPEDECK_WORKERS: "2" })
      try {
        expect((await fetch(`${url}/health`)).status).toBe(200)
        expect(output()).toContain("TAPEDECK_WORKERS needs DATABASE_URL")
      } finally {
        child.kill("SIGTERM")
        await child.exited
      }
    },
    120_000
  )
})
