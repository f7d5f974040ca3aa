import { afterAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { traceSink } from "tapedeck"
import { freshDatabase, startServer, type TestServer } from "tapedeck/testing"
import { jsonlSink, readLines } from "./JsonlSink.ts"

const scratch = mkdtempSync(join(tmpdir(), "tapedeck-sink-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const until = async (what: string, check: () => boolean | Promise<boolean>, ms = 45_000) => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await check()) return
    await Bun.sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

const finishedTrace = async (server: TestServer, key: string, name: string) => {
  const id = crypto.randomUUID()
  const at = new Date().toISOString()
  const r = await server.request("POST", "/api/v1/traces", {
    key,
    body: {
      id,
      name,
      started_at: at,
      status: "completed",
      spans: [{ id: crypto.randomUUID(), parent_id: null, span_type: "action", name: "step", started_at: at }]
    }
  })
  expect(r.status).toBe(200)
  return id
}

describe(`JSON-lines trace sink composed into a real server (${process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"})`, () => {
  test("every terminal trace reaches the sink at least once across a restart mid-delivery, never as another account's", async () => {
    const database = await freshDatabase()
    const env = {
      ...(database.backend === "pglite" ? { TAPEDECK_DATA_DIR: join(scratch, "data") } : database.env),
      TAPEDECK_JOB_LEASE_SECONDS: "8",
      TAPEDECK_JOB_BACKOFF_MS: "100",
      TAPEDECK_JOB_DEFER_SECONDS: "0"
    }
    const file = join(scratch, "traces.jsonl")
    let started = 0
    // The first server's sink takes deliveries and never finishes them: the server stops while they are in flight.
    const first = await startServer({
      env,
      extensions: [
        traceSink({ name: "jsonl", deliver: () => Effect.sync(() => started++).pipe(Effect.zipRight(Effect.never)) })
      ]
    })
    const acme = [await finishedTrace(first, first.keys.acme, "a1"), await finishedTrace(first, first.keys.acme, "a2")]
    const globex = [
      await finishedTrace(first, first.keys.globex, "g1"),
      await finishedTrace(first, first.keys.globex, "g2")
    ]
    await until("a delivery in flight", () => started > 0)
    await first.stop()

    const second = await startServer({ env, extensions: [jsonlSink(file)] })
    try {
      await until("every trace delivered", () => {
        const keys = new Set(readLines(file).map((l) => l.trace.id))
        return [...acme, ...globex].every((id) => keys.has(id))
      })
      const lines = readLines(file)
      const accountOf = (ids: ReadonlyArray<string>) =>
        new Set(lines.filter((l) => ids.includes(l.trace.id)).map((l) => l.account))
      expect(accountOf(acme).size).toBe(1)
      expect(accountOf(globex).size).toBe(1)
      expect([...accountOf(acme)][0]).not.toBe([...accountOf(globex)][0])
      // Each line names the account that owns its trace (as stored), and carries that trace as its owner reads it.
      const accounts = new Map(
        (await second.query<{ name: string; id: string }>("SELECT name, id::text AS id FROM accounts")).map((a) => [
          a.name,
          a.id
        ])
      )
      const owners = new Map(
        (
          await second.query<{ id: string; account_id: string }>(
            "SELECT id::text AS id, account_id::text AS account_id FROM traces"
          )
        ).map((t) => [t.id, t.account_id])
      )
      for (const id of acme) expect(owners.get(id)).toBe(accounts.get("acme")!)
      for (const id of globex) expect(owners.get(id)).toBe(accounts.get("globex")!)
      for (const line of lines) {
        expect(line.account).toBe(owners.get(line.trace.id)!)
        const owner = line.account === accounts.get("acme") ? second.keys.acme : second.keys.globex
        const read = (await (
          await second.request("GET", `/api/v1/traces/${line.trace.id}`, { key: owner })
        ).json()) as {
          name: string
        }
        expect(line.trace.name).toBe(read.name)
      }
      // One line per trace: the idempotency key is the same for every attempt.
      expect(new Set(lines.map((l) => l.key)).size).toBe(lines.length)
      // A trace sent to the other account's key is not readable there, and its line names its own account.
      const r = await second.request("GET", `/api/v1/traces/${globex[0]}`, { key: second.keys.acme })
      expect(r.status).toBe(404)
    } finally {
      await second.stop()
      await database.drop()
    }
  }, 120_000)

  test("a failing sink is retried with backoff, and its failures are in diagnostics", async () => {
    let calls = 0
    const server = await startServer({
      env: { TAPEDECK_JOB_BACKOFF_MS: "100", TAPEDECK_JOB_MAX_ATTEMPTS: "3", TAPEDECK_JOB_DEFER_SECONDS: "0" },
      extensions: [
        traceSink({
          name: "warehouse",
          deliver: () => Effect.sync(() => calls++).pipe(Effect.zipRight(Effect.fail(new Error("warehouse said 503"))))
        })
      ]
    })
    try {
      await finishedTrace(server, server.keys.acme, "t")
      let sinks: ReadonlyArray<{ name: string; dead_jobs: number; last_error: string | null }> = []
      await until("the delivery dead-lettered", async () => {
        const body = (await (await server.request("GET", "/api/v1/diagnostics")).json()) as { sinks?: typeof sinks }
        sinks = body.sinks ?? []
        return sinks[0]?.dead_jobs === 1
      })
      expect(calls).toBe(3)
      expect(sinks[0]!.name).toBe("warehouse")
      expect(sinks[0]!.last_error).toContain("warehouse said 503")
      // The other account has no deliveries of its own.
      const other = (await (
        await server.request("GET", "/api/v1/diagnostics", { key: server.keys.globex })
      ).json()) as { sinks: typeof sinks }
      expect(other.sinks[0]!.dead_jobs).toBe(0)
    } finally {
      await server.stop()
    }
  }, 120_000)
})
