import { afterAll, beforeAll, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createTestDatabase, type TestDatabase } from "./support/Database.ts"

// Between the port opening and the app being served (migrations, routes), and again once a SIGTERM arrives, every new
// request must be told to come back: an OTLP exporter drops a batch answered 404, and retries one answered 503.
// Requests in flight at the SIGTERM finish.
const root = new URL("..", import.meta.url).pathname
const dataDir = mkdtempSync(join(tmpdir(), "tapedeck-startup-"))
let database: TestDatabase | undefined
let storage: Record<string, string>
beforeAll(async () => {
  database = await createTestDatabase()
  storage = database.backend === "pglite" ? { TAPEDECK_DATA_DIR: dataDir } : database.env
})
afterAll(async () => {
  await database?.drop()
  rmSync(dataDir, { recursive: true, force: true })
})

const freePort = () => {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

/** The service as a process on a fresh database (TEST_DATABASE_URL's server, else PGlite in a directory that outlives a restart). */
const spawnServer = (port: number, storage: Record<string, string>) => {
  const env: Record<string, string> = { ...process.env } as Record<string, string>
  delete env.DATABASE_URL
  return Bun.spawn([process.execPath, "src/app/main.ts"], {
    cwd: root,
    env: { ...env, ...storage, PORT: String(port), HOST: "127.0.0.1", TAPEDECK_API_KEYS: "acme=svc_startup_key", TAPEDECK_RATE_LIMIT_PER_MINUTE: "1000000" },
    stdout: "ignore",
    stderr: "ignore"
  })
}

const untilHealthy = async (url: string) => {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if ((await fetch(`${url}/health`).catch(() => undefined))?.status === 200) return
    await Bun.sleep(50)
  }
  throw new Error("the server did not become healthy")
}

test("while starting, every route answers 503 unavailable with Retry-After; once served, the app answers", async () => {
  const port = freePort()
  const child = spawnServer(port, storage)
  const url = `http://127.0.0.1:${port}`
  const answers: Array<{ path: string; status: number; body: string; retryAfter: string | null }> = []
  const ask = async (path: string, init?: RequestInit) => {
    const res = await fetch(`${url}${path}`, init)
    const answer = { path, status: res.status, body: await res.text(), retryAfter: res.headers.get("retry-after") }
    answers.push(answer)
    return answer
  }
  try {
    const deadline = Date.now() + 60_000
    let ready = false
    while (!ready && Date.now() < deadline) {
      try {
        await ask("/v1/traces", { method: "POST", headers: { "content-type": "application/json", "x-service-key": "svc_startup_key" }, body: "{\"resourceSpans\":[]}" })
        await ask("/api/v1/traces", { headers: { "x-service-key": "svc_startup_key" } })
        ready = (await ask("/health")).status === 200
      } catch {
        await Bun.sleep(20) // not listening yet
      }
    }
    expect(ready).toBe(true)
    const beforeReady = answers.slice(0, answers.findIndex((a) => a.path === "/health" && a.status === 200))
    const refused = beforeReady.filter((a) => a.status === 503)
    expect(refused.length).toBeGreaterThan(0) // the window exists (PGlite loads and migrates for seconds)
    for (const answer of beforeReady) {
      if (answer.status === 503) {
        expect(JSON.parse(answer.body)).toEqual({ error: "starting", code: "unavailable", retryable: true })
        expect(answer.retryAfter).toBe("1")
      } else {
        // Served between two requests of one round: the app's own answers.
        expect(answer.status).toBe(200)
      }
    }
    // The first request after the hand-off is a WebSocket: it is upgraded by the app, not refused.
    const first = await new Promise<string>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/ws/v1/stream?token=svc_startup_key`)
      ws.onmessage = (event) => {
        resolve(String(event.data))
        ws.close()
      }
      ws.onerror = () => reject(new Error("the stream's WebSocket was refused"))
    })
    expect(JSON.parse(first)).toMatchObject({ type: "authenticated" })
    expect((await ask("/v1/traces", { method: "POST", headers: { "content-type": "application/json", "x-service-key": "svc_startup_key" }, body: "{\"resourceSpans\":[]}" })).status).toBe(200)
    const list = await ask("/api/v1/traces", { headers: { "x-service-key": "svc_startup_key" } })
    expect(list.status).toBe(200)
    expect(JSON.parse(list.body)).toMatchObject({ items: [] })
    expect((await ask("/api/v1/nowhere", { headers: { "x-service-key": "svc_startup_key" } })).status).toBe(404)
  } finally {
    child.kill("SIGTERM")
    await child.exited
  }
}, 90_000)

test("on SIGTERM: requests in flight finish, new ones get 503 unavailable, never a 404; what was acknowledged is stored", async () => {
  const port = freePort()
  const url = `http://127.0.0.1:${port}`
  let child = spawnServer(port, storage)
  await untilHealthy(url)
  const headers = { "content-type": "application/json", "x-service-key": "svc_startup_key" }
  const payload = "a span's input, long enough that a write takes a while ".repeat(20)
  const trace = () => ({
    id: crypto.randomUUID(),
    started_at: new Date().toISOString(),
    status: "completed",
    spans: Array.from({ length: 50 }, () => ({
      id: crypto.randomUUID(),
      parent_id: null,
      span_type: "llm_call",
      name: "call",
      input: payload,
      started_at: new Date().toISOString()
    }))
  })
  let signalledAt = Infinity
  let stop = false
  const acknowledged: Array<string> = []
  const drained: Array<string> = [] // sent before the SIGTERM, answered 200 after it
  const answers = new Map<string, number>()
  let cutOff = 0 // sent before the SIGTERM, never answered
  const writer = async () => {
    while (!stop) {
      const body = trace()
      const sentAt = performance.now()
      try {
        const res = await fetch(`${url}/api/v1/traces`, { method: "POST", headers, body: JSON.stringify(body) })
        const text = await res.text()
        if (res.status === 200) {
          acknowledged.push(body.id)
          if (sentAt < signalledAt && performance.now() > signalledAt) drained.push(body.id)
        } else {
          expect(res.status).toBe(503)
          expect(JSON.parse(text)).toEqual({ error: "stopping", code: "unavailable", retryable: true })
          expect(res.headers.get("retry-after")).toBe("1")
          await Bun.sleep(1000) // as Retry-After says
        }
        answers.set(String(res.status), (answers.get(String(res.status)) ?? 0) + 1)
      } catch {
        if (sentAt < signalledAt) cutOff++
        answers.set("no answer", (answers.get("no answer") ?? 0) + 1)
        await Bun.sleep(20) // refused: the listener is gone
      }
    }
  }
  const writers = Array.from({ length: 16 }, writer)
  try {
    while (acknowledged.length < 10) await Bun.sleep(20)
    signalledAt = performance.now()
    child.kill("SIGTERM")
    expect(await child.exited).toBe(0)
    stop = true
    await Promise.all(writers)
    expect(drained.length).toBeGreaterThan(0)
    expect(cutOff).toBe(0)
    expect(answers.get("404")).toBeUndefined()
    // Every acknowledged trace is there after a restart.
    child = spawnServer(port, storage)
    await untilHealthy(url)
    for (const id of acknowledged) {
      const res = await fetch(`${url}/api/v1/traces/${id}`, { headers })
      expect(res.status).toBe(200)
      expect(((await res.json()) as { spans: Array<unknown> }).spans.length).toBe(50)
    }
  } finally {
    stop = true
    child.kill("SIGTERM")
    await child.exited
  }
}, 120_000)
