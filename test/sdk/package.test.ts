import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"
import { until } from "../support/Until.ts"

// The published shape of the SDK, as a user gets it: built (npm run build:sdk), packed (npm pack), installed from
// the tarball into an empty folder, and run by the machine's real `node` (not Bun) against a running server.
const ROOT = join(import.meta.dir, "..", "..")
const NODE = Bun.which("node", {
  PATH: process.env
    .PATH!.split(":")
    .filter((p) => !p.includes("node_modules"))
    .join(":")
})

const sh = (cmd: ReadonlyArray<string>, cwd: string, env: Record<string, string> = {}) => {
  const result = Bun.spawnSync([...cmd], { cwd, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" })
  const stdout = result.stdout.toString()
  if (result.exitCode !== 0)
    throw new Error(`${cmd.join(" ")} exited ${result.exitCode}: ${result.stderr.toString()}${stdout}`)
  return stdout
}

let server: TestServer
let app: string
beforeAll(async () => {
  if (NODE === null) throw new Error("no node on PATH")
  server = await startTestServer({ TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "100" })
  app = mkdtempSync(join(tmpdir(), "tapedeck-sdk-"))
  sh([NODE, "scripts/build-sdk.mjs"], ROOT)
  const tarball = sh(["npm", "pack", "--silent", "--pack-destination", app, "./dist/sdk"], ROOT)
    .trim()
    .split("\n")
    .at(-1)!
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "sdk-user", private: true, type: "module" }))
  sh(["npm", "install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", join(app, tarball)], app)
  copyFileSync(join(ROOT, "examples", "node-agent.mjs"), join(app, "node-agent.mjs"))
}, 120_000)
afterAll(async () => {
  await server?.stop()
  if (app) rmSync(app, { recursive: true, force: true })
})

/** Lines of JSON the example prints, as they come. */
const readEvents = (stream: ReadableStream<Uint8Array>) => {
  const events: Array<Record<string, unknown>> = []
  void (async () => {
    let buffered = ""
    for await (const chunk of stream) {
      buffered += new TextDecoder().decode(chunk)
      let newline: number
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, newline)
        buffered = buffered.slice(newline + 1)
        try {
          events.push(JSON.parse(line))
        } catch {
          // not one of the example's events
        }
      }
    }
  })()
  return events
}

describe("@tapedeck/sdk as published", () => {
  test("the package holds JavaScript and declarations, has no dependencies, and loads by import and require", () => {
    const installed = join(app, "node_modules", "@tapedeck", "sdk")
    const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8"))
    expect(manifest.name).toBe("@tapedeck/sdk")
    expect(manifest.dependencies).toBeUndefined()
    const files = sh(["find", ".", "-type", "f"], installed).split("\n").filter(Boolean)
    expect(files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toEqual([])
    expect(files).toContain("./esm/index.d.ts")
    const probe = "typeof s.Tapedeck + ' ' + typeof s.wrapModel + ' ' + process.release.name + ' ' + typeof Bun"
    expect(
      sh([NODE!, "--input-type=module", "-e", `import * as s from "@tapedeck/sdk"; console.log(${probe})`], app).trim()
    ).toBe("function function node undefined")
    expect(sh([NODE!, "-e", `const s = require("@tapedeck/sdk"); console.log(${probe})`], app).trim()).toBe(
      "function function node undefined"
    )
    // The declarations resolve for a TypeScript user with NodeNext resolution (what `tsc` on Node projects uses).
    writeFileSync(
      join(app, "check.ts"),
      `import { Tapedeck, wrapModel, type Run } from "@tapedeck/sdk"
const t: Tapedeck = new Tapedeck({ baseUrl: "http://x", apiKey: "k" })
const run: Run = t.startRun({ name: "n" })
const m = wrapModel(run, "gpt-4o", async (p: string) => ({ content: p }))
export const answer: Promise<{ content: string }> = m("hi")
`
    )
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          noEmit: true,
          strict: true,
          module: "nodenext",
          moduleResolution: "nodenext",
          lib: ["es2022", "dom"],
          types: []
        },
        files: ["check.ts"]
      })
    )
    sh([NODE!, join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "."], app)
  }, 60_000)

  test("the example agent, run by node from the installed tarball, records a trace and answers an SDK-mode replay", async () => {
    const agent = Bun.spawn([NODE!, "--experimental-websocket", "node-agent.mjs", "Weekend in Lisbon"], {
      cwd: app,
      env: { ...process.env, TAPEDECK_URL: server.url, TAPEDECK_API_KEY: KEY_A },
      stdout: "pipe",
      stderr: "inherit"
    })
    try {
      const events = readEvents(agent.stdout)
      const recorded = await until(
        async () => events.find((e) => "recorded" in e)?.recorded as string | undefined,
        "the recorded run",
        15_000
      )
      const trace = (await (await server.get(`/api/v1/traces/${recorded}`)).json()) as any
      expect(trace).toMatchObject({
        id: recorded,
        name: "weekend-planner",
        status: "completed",
        input: "Weekend in Lisbon"
      })
      const plan = trace.spans.find((s: any) => s.name === "plan")
      // Sent without a cost: priced from the table (gpt-4o-mini's dated name) and marked as an estimate.
      expect(plan).toMatchObject({
        span_type: "llm_call",
        input_tokens: 1200,
        output_tokens: 300,
        cost: 0.00036,
        cost_estimated: true
      })
      expect(trace.spans.find((s: any) => s.name === "lookup_city")).toMatchObject({ span_type: "tool_call" })

      await until(async () => events.find((e) => e.ready === true), "the replay registration", 15_000)
      const fork = (await (
        await server.post("/api/v1/forks", {
          trace_id: recorded,
          fork_point_span_id: plan.id,
          modified_input: "Weekend in Porto",
          mock_outputs: { lookup_city: { city: "Porto", rating: 5, mocked: true } }
        })
      ).json()) as any
      const started = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
      expect(started).toMatchObject({ status: "replaying", mode: "sdk" })
      const state = await until(
        async () => {
          const s = (await (await server.get(`/api/v1/forks/${fork.id}`)).json()) as any
          return s.status === "replaying" ? undefined : s
        },
        "the replay to finish",
        15_000
      )
      expect(state).toMatchObject({ status: "completed", resultTraceId: started.result_trace_id })
      const result = (await (await server.get(`/api/v1/traces/${started.result_trace_id}?env=sandbox`)).json()) as any
      expect(result.input).toBe("Weekend in Porto")
      expect(result.spans.find((s: any) => s.name === "lookup_city").output).toEqual({
        city: "Porto",
        rating: 5,
        mocked: true
      })
    } finally {
      agent.kill()
      await agent.exited
    }
  }, 60_000)
})
