import { afterAll, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

// Between the port opening and the app being served (migrations, routes) every request must be told to come back:
// an OTLP exporter drops a batch answered 404, and retries one answered 503.
const root = new URL("..", import.meta.url).pathname
const dataDir = mkdtempSync(join(tmpdir(), "tapedeck-startup-"))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

const freePort = () => {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

test("while starting, every route answers 503 unavailable with Retry-After; once served, the app answers", async () => {
  const port = freePort()
  const env: Record<string, string> = { ...process.env } as Record<string, string>
  delete env.DATABASE_URL
  const child = Bun.spawn([process.execPath, "src/main.ts"], {
    cwd: root,
    env: { ...env, TAPEDECK_DATA_DIR: dataDir, PORT: String(port), HOST: "127.0.0.1", TAPEDECK_API_KEYS: "acme=svc_startup_key" },
    stdout: "ignore",
    stderr: "ignore"
  })
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
