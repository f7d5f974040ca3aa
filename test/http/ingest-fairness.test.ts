import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import net from "node:net"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"

// Two permits, and bodies that must arrive within 4 s, at 1 KB/s on average after the first 2.5 s.
const DEADLINE_MS = 4000
const GRACE_MS = 2500
let server: TestServer
beforeAll(async () => {
  server = await startTestServer({
    TAPEDECK_INGEST_MAX_INFLIGHT: "2",
    TAPEDECK_BODY_DEADLINE_MS: String(DEADLINE_MS),
    TAPEDECK_BODY_GRACE_MS: String(GRACE_MS),
    TAPEDECK_BODY_MIN_BYTES_PER_SECOND: "1024"
  })
})
afterAll(() => server.stop())

interface Answer {
  readonly status: number | "closed"
  readonly body: any
  readonly headers: string
  readonly elapsedMs: number
}

/**
 * A raw upload that declares `declared` bytes, sends its headers and `first`, then `step` more bytes every
 * `everyMs` until the server answers or closes the connection.
 */
const upload = (
  path: string,
  key: string,
  options: { declared: number; first: string; step: number; everyMs: number; contentType?: string }
) => {
  const { hostname, port } = new URL(server.url)
  const started = performance.now()
  let ticker: ReturnType<typeof setInterval> | undefined
  const answer = new Promise<Answer>((resolve) => {
    const socket = net.connect(Number(port), hostname)
    let reply = ""
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearInterval(ticker)
      const elapsedMs = performance.now() - started
      const status = /^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1]
      const split = reply.indexOf("\r\n\r\n")
      let body: unknown
      try {
        body = JSON.parse(reply.slice(split + 4))
      } catch {
        body = reply.slice(split + 4)
      }
      resolve({
        status: status === undefined ? "closed" : Number(status),
        body,
        headers: reply.slice(0, split).toLowerCase(),
        elapsedMs
      })
      socket.destroy()
    }
    socket.on("error", () => {})
    socket.on("data", (d) => {
      reply += d.toString()
      const split = reply.indexOf("\r\n\r\n")
      const length = /content-length: (\d+)/i.exec(reply)?.[1]
      if (split >= 0 && length !== undefined && reply.length - split - 4 >= Number(length)) finish()
    })
    socket.on("close", finish)
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: x\r\nx-service-key: ${key}\r\ncontent-type: ${options.contentType ?? "application/json"}\r\n` +
        `content-length: ${options.declared}\r\n\r\n${options.first}`
    )
    ticker = setInterval(() => {
      if (!socket.destroyed) socket.write("x".repeat(options.step))
    }, options.everyMs)
  })
  return answer
}

const slowExport = (key: string) =>
  upload("/v1/traces", key, { declared: 100_000, first: '{"resourceSpans":[', step: 1, everyMs: 200 })

const exportOf = (key: string) =>
  fetch(`${server.url}/v1/traces`, {
    method: "POST",
    headers: { "x-service-key": key, "content-type": "application/json" },
    body: JSON.stringify({ resourceSpans: [] })
  })

const expectTimeout = (answer: Answer, maxMs: number) => {
  expect(answer.status).toBe(408)
  expect(answer.body.code).toBe("request_timeout")
  expect(answer.body.retryable).toBe(true)
  expect(typeof answer.body.error).toBe("string")
  expect(answer.elapsedMs).toBeLessThan(maxMs)
}

describe("request bodies must arrive in time", () => {
  test("an OTLP export trickling one byte at a time is answered 408 after the grace period, and its permit is free at once", async () => {
    const [first, second] = await Promise.all([slowExport(KEY_A), slowExport(KEY_A)])
    // Behind the rate as soon as the grace period ends: well before the deadline.
    expectTimeout(first, DEADLINE_MS - 100)
    expectTimeout(second, DEADLINE_MS - 100)
    expect(first.elapsedMs).toBeGreaterThanOrEqual(GRACE_MS - 100)
    expect(first.headers).toContain("connection: close")
    expect((await exportOf(KEY_A)).status).toBe(200)
    expect((await exportOf(KEY_A)).status).toBe(200)
  })

  test("a body that keeps the rate but does not finish is answered 408 at the deadline", async () => {
    const answer = await upload("/v1/traces", KEY_A, {
      declared: 10_000_000,
      first: '{"resourceSpans":[',
      step: 512,
      everyMs: 100
    })
    expectTimeout(answer, DEADLINE_MS + 1500)
    expect(answer.elapsedMs).toBeGreaterThanOrEqual(DEADLINE_MS - 100)
    expect(answer.body.error).toContain("did not arrive within")
  })

  test("a small body (read whole, not chunk by chunk) that stalls is answered 408 when its last byte is due", async () => {
    // 500 bytes at 1 KB/s after the grace period: the last is due 2.5 s + 0.49 s after the headers.
    const dueMs = GRACE_MS + (499 * 1000) / 1024
    for (const path of ["/api/v1/enforcement/check", "/api/v1/traces"]) {
      const answer = await upload(path, KEY_A, { declared: 500, first: '{"run_id":"', step: 1, everyMs: 200 })
      expectTimeout(answer, dueMs + 1000)
      expect(answer.elapsedMs).toBeGreaterThanOrEqual(dueMs - 100)
      expect(answer.body.error).toContain("arrived too slowly")
      if (path === "/api/v1/enforcement/check") expect(answer.headers).toContain("connection: close")
    }
    // A small body sent whole at once is read as before.
    expect((await exportOf(KEY_A)).status).toBe(200)
  })

  test("the same holds for POST /api/v1/traces, the enforcement check (its lean route and the API's), POST /api/v1/batch and the MCP endpoints", async () => {
    for (const path of [
      "/api/v1/traces",
      "/api/v1/enforcement/check",
      "/api/v1/enforcement/check?via=api",
      "/api/v1/batch",
      "/mcp",
      "/mcp/docs"
    ]) {
      const answer = await upload(path, KEY_A, { declared: 50_000, first: '{"id":"', step: 1, everyMs: 200 })
      expectTimeout(answer, DEADLINE_MS - 100)
      if (path.startsWith("/api/v1/enforcement/check")) expect(answer.headers).toContain("connection: close")
    }
    expect((await server.get("/api/v1/traces?limit=1")).status).toBe(200)
  })
})

describe("ingestion permits are authenticated and shared per account", () => {
  test("while one account's slow uploads hold every permit, bad credentials are 401 and another account's export is admitted", async () => {
    const slow = [slowExport(KEY_B), slowExport(KEY_B)]
    await Bun.sleep(300)
    // globex holds both permits: its next export is refused, not queued.
    const refused = await exportOf(KEY_B)
    expect(refused.status).toBe(503)
    expect(refused.headers.get("retry-after")).toBe("1")
    expect(((await refused.json()) as any).code).toBe("ingest_backpressure")
    // Credentials are checked before a permit is asked for: an unknown key, and a key of globex's that worked a
    // moment ago and was revoked since, are 401, not 503.
    expect((await exportOf("svc_no_such_key_0000")).status).toBe(401)
    const created = (await (await server.post("/api/v1/api-keys", { name: "soon revoked" }, KEY_B)).json()) as {
      id: string
      key: string
    }
    expect((await server.get("/api/v1/traces?limit=1", created.key)).status).toBe(200)
    expect((await exportOf(created.key)).status).toBe(503)
    expect((await server.request("DELETE", `/api/v1/api-keys/${created.id}`, { key: KEY_B })).status).toBe(200)
    const revoked = await exportOf(created.key)
    expect(revoked.status).toBe(401)
    expect(((await revoked.json()) as any).code).toBe("unauthorized")
    const anonymous = await fetch(`${server.url}/v1/traces`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}"
    })
    expect(anonymous.status).toBe(401)
    expect(((await anonymous.json()) as any).code).toBe("unauthorized")
    // acme is under its fair share (one of two): it takes back a permit of globex's uploads.
    const admitted = await exportOf(KEY_A)
    expect(admitted.status).toBe(200)
    const answers = await Promise.all(slow)
    const statuses = answers.map((a) => a.status).sort()
    expect(statuses).toEqual([408, 503])
    const preempted = answers.find((a) => a.status === 503)!
    expect(preempted.body.code).toBe("ingest_backpressure")
    expect(preempted.body.retryable).toBe(true)
    expect(preempted.elapsedMs).toBeLessThan(GRACE_MS - 100)
    expect((await exportOf(KEY_B)).status).toBe(200)
  })
})
