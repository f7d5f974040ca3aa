import { describe, expect, test } from "bun:test"

// What the server writes to its log, as an operator sees it: the real entry point in its own process.
const root = new URL("..", import.meta.url).pathname
const KEY = "svc_logs_test_key_0000000001"

interface Run {
  readonly url: string
  readonly output: () => string
  readonly stop: () => Promise<void>
}

const start = async (env: Record<string, string>): Promise<Run> => {
  const base: Record<string, string> = { ...process.env } as Record<string, string>
  delete base.DATABASE_URL
  const child = Bun.spawn([process.execPath, "src/app/main.ts"], {
    cwd: root,
    env: {
      ...base,
      TAPEDECK_DATA_DIR: "memory://",
      PORT: "0",
      HOST: "127.0.0.1",
      TAPEDECK_API_KEYS: `acme=${KEY}`,
      MIMALLOC_PURGE_DELAY: "-1",
      ...env
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
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const port = /Listening on http:\/\/[^:]+:(\d+)/.exec(output)?.[1]
    if (port !== undefined) {
      const url = `http://127.0.0.1:${port}`
      if ((await fetch(`${url}/health`).catch(() => undefined))?.status === 200) {
        return {
          url,
          output: () => output,
          stop: async () => {
            child.kill("SIGTERM")
            await child.exited
          }
        }
      }
    }
    await Bun.sleep(100)
  }
  child.kill("SIGKILL")
  throw new Error(`server did not become ready:\n${output}`)
}

/** A few requests: 200s, a 401 and a URL carrying a credential. */
const traffic = async (url: string) => {
  expect((await fetch(`${url}/api/v1/traces`, { headers: { "x-service-key": KEY } })).status).toBe(200)
  expect((await fetch(`${url}/api/v1/traces?token=hunter2`)).status).toBe(401)
  expect((await fetch(`${url}/health`)).status).toBe(200)
}

const summaryCounts = (output: string) => {
  const lines = output.split("\n").filter((l) => l.includes("requests answered in the last"))
  const sum = (field: string) =>
    lines.reduce((n, l) => n + Number(new RegExp(`(?:^| )${field}=(\\d+)`).exec(l)?.[1] ?? "NaN"), 0)
  return { lines: lines.length, requests: sum("requests"), ok: sum("2xx"), client: sum("4xx"), server: sum("5xx") }
}

describe("logs", () => {
  test("quiet by default: start-up lines, no line per request, a summary per period", async () => {
    const run = await start({ TAPEDECK_LOG_SUMMARY_SECONDS: "1" })
    try {
      await traffic(run.url)
      await Bun.sleep(2500)
    } finally {
      await run.stop()
    }
    const output = run.output()
    expect(output).toContain("Listening on http://127.0.0.1:")
    expect(output).toContain("storage: embedded pglite")
    expect(output).not.toContain("Sent HTTP response")
    expect(output).not.toContain("hunter2")
    const counts = summaryCounts(output)
    expect(counts.lines).toBeGreaterThanOrEqual(1)
    // /health is answered before the API (the readiness probes are not counted): one 200 and one 401.
    expect(counts).toMatchObject({ requests: 2, ok: 1, client: 1, server: 0 })
    const line = output.split("\n").find((l) => l.includes("requests answered in the last 1 s"))!
    expect(line).toMatch(/level=INFO .*message="requests answered in the last 1 s"/)
    for (const field of ["requests", "2xx", "3xx", "4xx", "5xx", "slowest_ms"]) expect(line).toMatch(new RegExp(` ${field}=\\d+`))
  })

  test("TAPEDECK_ACCESS_LOG=true with JSON logs: one JSON line per request, credentials redacted", async () => {
    const run = await start({ TAPEDECK_ACCESS_LOG: "true", TAPEDECK_LOG_FORMAT: "json", TAPEDECK_LOG_SUMMARY_SECONDS: "0" })
    try {
      await traffic(run.url)
      await Bun.sleep(300)
    } finally {
      await run.stop()
    }
    const output = run.output()
    const access = output
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l))
      .filter((l) => l.annotations?.["http.url"] !== undefined)
    const refused = access.find((l) => l.annotations["http.status"] === 401)
    expect(refused).toMatchObject({
      logLevel: "INFO",
      annotations: { "http.method": "GET", "http.url": "/api/v1/traces?token=%5Bredacted%5D", "http.status": 401 }
    })
    expect(access.some((l) => l.annotations["http.url"] === "/api/v1/traces" && l.annotations["http.status"] === 200)).toBe(true)
    expect(output).not.toContain("hunter2")
    expect(output).not.toContain("requests answered in the last")
  })
})
