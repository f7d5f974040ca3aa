import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as jose from "jose"
import { startFakeOpenAi } from "./support/FakeOpenAi.ts"

// No secret ever reaches the logs: the real entry point at its most verbose log level, every kind of secret
// configured, and requests that use, mistype, mint and echo them. The captured stdout and stderr are searched.
const root = new URL("..", import.meta.url).pathname
const SECRETS = {
  apiKey: "svc_secret_key_4f1c9a7e2b",
  wrongKey: "svc_wrong_key_0d9e8f7a6b",
  jwtSecret: "jwt-secret-7c1d2e3f4a5b6c7d8e9f",
  llmKey: "sk-llm-secret-91a2b3c4d5e6",
  webhookKey: "webhook-sealing-key-2a3b4c5d6e7f8091a2b3c4d5e6f70819"
}
const fake = startFakeOpenAi(() => ({ status: 401, errorMessage: `Incorrect API key provided: ${SECRETS.llmKey}` }))

let output = ""
let url = ""
let child: ReturnType<typeof Bun.spawn> | undefined
beforeAll(async () => {
  const env: Record<string, string> = { ...process.env } as Record<string, string>
  delete env.DATABASE_URL
  child = Bun.spawn([process.execPath, "src/app/main.ts"], {
    cwd: root,
    env: {
      ...env,
      TAPEDECK_DATA_DIR: "memory://",
      PORT: "0",
      HOST: "127.0.0.1",
      TAPEDECK_LOG_LEVEL: "All",
      // Every line the service can write, access lines included: none may carry a secret.
      TAPEDECK_ACCESS_LOG: "true",
      TAPEDECK_API_KEYS: `acme=${SECRETS.apiKey}`,
      TAPEDECK_JWT_SECRET: SECRETS.jwtSecret,
      TAPEDECK_LLM_BASE_URL: fake.baseUrl,
      TAPEDECK_LLM_API_KEY: SECRETS.llmKey,
      TAPEDECK_LLM_MAX_RETRIES: "0",
      TAPEDECK_WEBHOOK_SECRET_KEY: SECRETS.webhookKey,
      TAPEDECK_JOB_POLL_MS: "50"
    },
    stdout: "pipe",
    stderr: "pipe"
  })
  const decoder = new TextDecoder()
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream) output += decoder.decode(chunk)
  }
  void pump(child.stdout as ReadableStream<Uint8Array>)
  void pump(child.stderr as ReadableStream<Uint8Array>)
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline && url === "") {
    const match = /Listening on http:\/\/[^:]+:(\d+)/.exec(output)
    if (match) url = `http://127.0.0.1:${match[1]}`
    else await Bun.sleep(100)
  }
  if (url === "") throw new Error(`server did not start:\n${output}`)
}, 60_000)
afterAll(async () => {
  child?.kill("SIGTERM")
  await child?.exited
  await fake.stop()
})

const call = async (path: string, init: RequestInit & { key?: string } = {}) => {
  const res = await fetch(`${url}${path}`, {
    ...init,
    headers: { "content-type": "application/json", "x-service-key": init.key ?? SECRETS.apiKey, ...init.headers }
  })
  const text = await res.text()
  return { status: res.status, body: text === "" ? undefined : JSON.parse(text) }
}

describe("secrets never reach the logs", () => {
  test("keys, JWTs, the LLM key, webhook secrets and new API keys are absent from every log line", async () => {
    // Used correctly, mistyped, in both schemes.
    expect((await call("/api/v1/traces")).status).toBe(200)
    expect((await call("/api/v1/traces", { key: SECRETS.wrongKey })).status).toBe(401)
    expect((await fetch(`${url}/api/v1/traces`, { headers: { authorization: `Bearer ${SECRETS.wrongKey}` } })).status).toBe(401)
    const jwt = await new jose.SignJWT({ sub: "user-1", account: "acme" }).setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("5m").sign(new TextEncoder().encode(SECRETS.jwtSecret))
    expect((await fetch(`${url}/api/v1/traces`, { headers: { authorization: `Bearer ${jwt}` } })).status).toBe(200)
    const forged = await new jose.SignJWT({ sub: "user-1", account: "acme" }).setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("5m").sign(new TextEncoder().encode("not-the-secret-at-all-0123456789"))
    expect((await fetch(`${url}/api/v1/traces`, { headers: { authorization: `Bearer ${forged}` } })).status).toBe(401)

    // A judge call the provider refuses, echoing the LLM key: the run fails, its error and the logs stay clean.
    const traceId = crypto.randomUUID()
    expect((await call("/api/v1/traces", {
      method: "POST",
      body: JSON.stringify({ id: traceId, status: "completed", started_at: "2026-11-01T00:00:00.000Z", input: { q: "hi" }, output: { a: "ok" } })
    })).status).toBe(200)
    const evaluation = await call("/api/v1/evaluations", {
      method: "POST",
      body: JSON.stringify({ name: "secrets", criteria: [{ name: "helpful", description: "Is it helpful?" }] })
    })
    expect(evaluation.status).toBe(200)
    expect((await call(`/api/v1/evaluations/${evaluation.body.id}/run`, { method: "POST", body: JSON.stringify({ trace_ids: [traceId] }) })).status).toBe(200)
    let run: any
    for (let i = 0; i < 200 && run?.status !== "failed"; i++) {
      await Bun.sleep(50)
      run = (await call(`/api/v1/evaluations/${evaluation.body.id}`)).body.runs[0]
    }
    expect(run.status).toBe("failed")
    expect(JSON.stringify(run)).not.toContain(SECRETS.llmKey)

    // A webhook secret is shown once; a new API key is shown once.
    const rule = await call("/api/v1/eval-rules", {
      method: "POST",
      body: JSON.stringify({ evaluation_id: evaluation.body.id, webhook_url: "https://hooks.example.com/tapedeck" })
    })
    expect(rule.status).toBe(200)
    const created = await call("/api/v1/api-keys", { method: "POST", body: JSON.stringify({ name: "ci" }) })
    expect(created.status).toBe(200)
    const newKey = created.body.key as string
    expect(newKey).toStartWith("svc_")
    expect((await call("/api/v1/traces", { key: newKey })).status).toBe(200)
    const secret = (rule.body.webhookSecret ?? rule.body.webhook_secret) as string
    expect(typeof secret).toBe("string")

    // Browsers authenticate the live stream with ?token=: the query must not reach an access log either.
    for (const token of [SECRETS.apiKey, SECRETS.wrongKey]) {
      const socket = new WebSocket(`${url.replace(/^http/, "ws")}/ws/v1/stream?token=${token}`)
      await new Promise<void>((resolve) => {
        socket.addEventListener("close", () => resolve())
        socket.addEventListener("error", () => resolve())
        socket.addEventListener("open", () => setTimeout(() => socket.close(), 100))
      })
    }

    await Bun.sleep(300)
    expect(output).toContain("Listening on")
    // The access log is on at this level (the lines the secrets must stay out of exist).
    expect(output).toMatch(/Sent HTTP response.*http\.url=\/api\/v1\/traces/)
    for (const value of [...Object.values(SECRETS), jwt, forged, secret, newKey]) {
      expect(output).not.toContain(value)
    }
  }, 60_000)
})
