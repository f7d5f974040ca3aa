import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { expectedOutput, matchesPattern, quickstartBlocks } from "./Quickstart.ts"

// Runs the README's quickstart as a newcomer would: the start command, then every shell block in one bash
// session with nothing from this process's environment but PATH and HOME (`set -u`: a variable the README
// uses before setting fails the run), and each block's output against the `# …` lines the README shows.
const root = new URL("../..", import.meta.url).pathname
const readme = readFileSync(join(root, "README.md"), "utf8")
const blocks = quickstartBlocks(readme)
const shellBlocks = blocks.filter((b) => b.lang === "sh")
const START = "npm install && npx bun run start"
const STEP = "@@quickstart-step@@"

const dataDir = mkdtempSync(join(tmpdir(), "tapedeck-quickstart-"))
// Inside the clone, as the README says, so that `node first-trace.mjs` finds the OpenTelemetry packages.
const workDir = join(root, "test", "docs", `.quickstart-${process.pid}`)
let server: ChildProcess | undefined
let output = ""
let url = ""
let key = ""

beforeAll(async () => {
  expect(shellBlocks[0]?.body.trim()).toBe(START)
  // `npm install` has run (this test runs from the installed clone); start the server the way the README does.
  const env: Record<string, string | undefined> = {
    ...process.env,
    PORT: "0",
    HOST: "127.0.0.1",
    TAPEDECK_DATA_DIR: dataDir
  }
  delete env.DATABASE_URL
  delete env.TAPEDECK_API_KEYS
  server = spawn("bash", ["-c", START.slice("npm install && ".length)], { cwd: root, env, detached: true })
  server.stdout!.on("data", (chunk) => (output += chunk))
  server.stderr!.on("data", (chunk) => (output += chunk))
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline && url === "") {
    const port = /Listening on http:\/\/[^:]+:(\d+)/.exec(output)?.[1]
    if (port !== undefined && (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.status === 200) {
      url = `http://127.0.0.1:${port}`
    } else await Bun.sleep(100)
  }
  if (url === "") throw new Error(`the server did not become ready:\n${output}`)
  key = /^\s+(svc_\S+)\s*$/m.exec(output)?.[1] ?? ""
  mkdirSync(workDir, { recursive: true })
})

afterAll(async () => {
  if (server?.pid !== undefined && server.exitCode === null) {
    const exited = new Promise((resolve) => server!.once("exit", resolve))
    process.kill(-server.pid, "SIGTERM")
    await exited
  }
  rmSync(workDir, { recursive: true, force: true })
  rmSync(dataDir, { recursive: true, force: true })
})

describe("README quickstart", () => {
  test("the server prints a key and a start-up hint that work", () => {
    expect(key).toMatch(/^svc_[A-Za-z0-9_-]{20,}$/)
    const hint = /More keys:\s+(.+)$/m.exec(output)?.[1] ?? ""
    expect(hint).toContain("npx bun run tapedeck keys create --account default")
    expect(output).not.toMatch(/(^|[^x] )bun run tapedeck/m)
  })

  test("the code examples are 15 lines at most and use the same exporter settings", () => {
    const js = blocks.filter((b) => b.lang === "js")
    const py = blocks.filter((b) => b.lang === "python")
    expect(js.length).toBe(1)
    expect(py.length).toBe(1)
    for (const b of [...js, ...py]) {
      expect(b.body.trimEnd().split("\n").length).toBeLessThanOrEqual(15)
      expect(b.body).toContain("/v1/traces")
      expect(b.body).toContain(`"x-service-key"`)
      expect(b.body).toContain(`"service.name": "travel-agent"`)
    }
    // The Python one cannot run here (no OpenTelemetry for Python); it must at least parse.
    const parsed = spawnSync("python3", ["-c", "import ast, sys; ast.parse(sys.stdin.read())"], { input: py[0]!.body })
    if (parsed.error === undefined) expect(parsed.stderr.toString()).toBe("")
  })

  test("every shell block runs as written and prints what the README shows", () => {
    const js = blocks.find((b) => b.lang === "js")!
    expect(readme).toContain("Save this as `first-trace.mjs`")
    writeFileSync(join(workDir, "first-trace.mjs"), js.body)

    const steps = shellBlocks.slice(1)
    const exported = steps[0]!.body
    expect(exported).toContain("export U=http://localhost:8080 K=svc_…")
    const script = [
      "set -euo pipefail",
      ...steps.map(
        (s, i) =>
          (i === 0 ? s.body.replace("http://localhost:8080", url).replace("svc_…", key) : s.body) +
          `\nprintf '\\n${STEP}\\n'`
      )
    ].join("\n")
    const run = spawnSync("bash", ["-c", script], {
      cwd: workDir,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp" },
      timeout: 60_000
    })
    const stdout = run.stdout.toString()
    expect({ code: run.status, stderr: run.stderr.toString() }).toEqual({ code: 0, stderr: "" })

    const outputs = stdout.split(`\n${STEP}\n`)
    let checked = 0
    steps.forEach((step, i) => {
      for (const pattern of expectedOutput(step.body)) {
        checked++
        if (!matchesPattern(outputs[i] ?? "", pattern)) {
          throw new Error(`block ${i + 2} printed\n${outputs[i]}\nwhich does not match the README's\n${pattern}`)
        }
      }
    })
    expect(checked).toBeGreaterThanOrEqual(3)

    // The OpenTelemetry example's trace, fetched by the trace id it printed, is that very trace.
    const otelStep = steps.findIndex((s) => s.body.includes("node first-trace.mjs"))
    const detail = JSON.parse(outputs[otelStep]!)
    expect(detail.otelTraceId).toMatch(/^[0-9a-f]{32}$/)
    expect(detail.metadata.otel.trace_id).toBe(detail.otelTraceId)
    expect(detail.spans.map((s: { model: string }) => s.model)).toEqual(["gpt-4o"])
  })
})
