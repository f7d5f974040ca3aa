import { afterAll, describe, expect, test } from "bun:test"
import { Schema } from "effect"
import { Health } from "#src/domain/Health"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

// The real entry points as a user runs them: `bun run start` and `bun run tapedeck`, embedded storage.
const root = new URL("../..", import.meta.url).pathname
const dataDir = mkdtempSync(join(tmpdir(), "tapedeck-process-"))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

const baseEnv = () => {
  const env: Record<string, string> = { ...process.env } as Record<string, string>
  delete env.DATABASE_URL
  delete env.TAPEDECK_API_KEYS
  return { ...env, TAPEDECK_DATA_DIR: dataDir, PORT: "0", HOST: "127.0.0.1", TAPEDECK_LOG_LEVEL: "Info" }
}

interface Running {
  readonly url: string
  readonly output: () => string
  readonly stop: () => Promise<number>
}

const start = async (): Promise<Running> => {
  const child = Bun.spawn([process.execPath, "run", "start"], {
    cwd: root,
    env: baseEnv(),
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
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const match = /Listening on http:\/\/[^:]+:(\d+)/.exec(output)
    if (match) {
      const url = `http://127.0.0.1:${match[1]}`
      const health = await fetch(`${url}/health`).catch(() => undefined)
      if (health?.status === 200) {
        return {
          url,
          output: () => output,
          stop: async () => {
            child.kill("SIGTERM")
            return await child.exited
          }
        }
      }
    }
    await Bun.sleep(100)
  }
  child.kill("SIGKILL")
  throw new Error(`server did not become ready:\n${output}`)
}

const cli = (...args: Array<string>) => {
  const result = Bun.spawnSync([process.execPath, "run", "tapedeck", ...args], { cwd: root, env: baseEnv() })
  return { code: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() }
}

describe("bun run start (embedded) and bun run tapedeck", () => {
  test("first start prints one key; data and keys survive a restart; the CLI refuses a data directory in use", async () => {
    const first = await start()
    const key = /\b(svc_[A-Za-z0-9_-]{43})\b/.exec(first.output())?.[1]
    expect(key).toBeDefined()
    expect(first.output()).toContain("x-service-key")
    // /health of the running process (Bun's router answers it) is the declared Health document, strictly.
    const health = await fetch(`${first.url}/health`)
    expect(health.status).toBe(200)
    const body = (await health.json()) as { timestamp: string }
    expect(Schema.decodeUnknownSync(Health)(body, { onExcessProperty: "error" })).toBeDefined()
    expect(Math.abs(Date.parse(body.timestamp) - Date.now())).toBeLessThan(60_000)
    const id = crypto.randomUUID()
    const created = await fetch(`${first.url}/api/v1/traces`, {
      method: "POST",
      headers: { "x-service-key": key!, "content-type": "application/json" },
      body: JSON.stringify({ id, started_at: "2026-03-01T00:00:00Z", name: "durable" })
    })
    expect(created.status).toBe(200)

    const busy = cli("keys", "create", "--account", "default")
    expect(busy.code).toBe(1)
    expect(busy.stderr).toContain("is in use by another Tapedeck process")

    expect(await first.stop()).toBe(0)

    const made = cli("keys", "create", "--account", "ops")
    expect(made.code).toBe(0)
    const lines = made.stdout.trim().split("\n")
    const newKey = lines.at(-1)!
    expect(newKey).toMatch(/^svc_[A-Za-z0-9_-]{43}$/)
    const listed = cli("keys", "list", "--account", "ops")
    expect(listed.stdout).toContain(newKey.slice(0, 12))
    expect(listed.stdout).not.toContain(newKey)

    const second = await start()
    expect(second.output()).not.toMatch(/svc_[A-Za-z0-9_-]{43}/)
    const detail = await fetch(`${second.url}/api/v1/traces/${id}`, { headers: { authorization: `Bearer ${key}` } })
    expect(((await detail.json()) as any).name).toBe("durable")
    // The ops key works, and is another account: the default account's trace is a 404 for it.
    expect((await fetch(`${second.url}/api/v1/traces/${id}`, { headers: { "x-service-key": newKey } })).status).toBe(
      404
    )
    expect(await second.stop()).toBe(0)

    const revoked = cli("keys", "revoke", newKey.slice(0, 12))
    expect(revoked.code).toBe(0)
    const third = await start()
    expect((await fetch(`${third.url}/api/v1/traces`, { headers: { "x-service-key": newKey } })).status).toBe(401)
    await third.stop()
  }, 180_000)
})
