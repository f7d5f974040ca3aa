import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Either, ParseResult, Schema } from "effect"
import { TapedeckApi } from "#src/api/Api"
import { startFakeOpenAi, type FakeOpenAi } from "../support/FakeOpenAi.ts"
import { span, trace, uuid } from "../support/Fixtures.ts"
import { startTestServer, type TestServer } from "../support/TestServer.ts"

// Handlers that answer with HttpServerResponse.unsafeJson or .raw skip the encoding HttpApi does with the declared
// success schema (docs/architecture.md, "SQL rows and raw responses"). This file is the contract test that covers
// them: every such answer is decoded with the success schema its endpoint declares, extra keys refused (encoding
// would have dropped them), and a handler that answers raw without a row here fails the last test.
const root = new URL("../..", import.meta.url).pathname

interface Endpoint {
  readonly group: string
  readonly name: string
  readonly method: string
  readonly pattern: RegExp
  readonly success: Schema.Schema<unknown, unknown, never>
}

const endpoints: ReadonlyArray<Endpoint> = Object.values(TapedeckApi.groups).flatMap((group: any) =>
  Object.values(group.endpoints).map((e: any) => ({
    group: group.identifier,
    name: e.name,
    method: e.method,
    pattern: new RegExp(`^${e.path.replace(/:[A-Za-z]+/g, "[^/]+")}$`),
    success: e.successSchema
  }))
)
const endpointOf = (method: string, path: string): Endpoint => {
  const found = endpoints.find((e) => e.method === method && e.pattern.test(path.split("?")[0]!))
  if (found === undefined) throw new Error(`no endpoint for ${method} ${path}`)
  return found
}

/** The (group, endpoint) pairs whose handler answers raw, read from src/http: what this file must cover. */
const rawHandlers = (): ReadonlyArray<string> => {
  const dir = join(root, "src/http")
  return readdirSync(dir)
    .filter((f) => f.endsWith(".ts"))
    .flatMap((file) => {
      const text = readFileSync(join(dir, file), "utf8")
      const group = /HttpApiBuilder\.group\(\s*TapedeckApi,\s*"([^"]+)"/.exec(text)?.[1]
      if (group === undefined) return []
      const helpers = [
        ...text.matchAll(/const (\w+) = \([^)]*\)(?:: [^=]+)? =>\s*HttpServerResponse\.(?:unsafeJson|raw)\b/g)
      ].map((m) => m[1]!)
      const raw = new RegExp(`HttpServerResponse\\.(unsafeJson|raw)\\(${helpers.map((h) => `|\\b${h}\\(`).join("")}`)
      return text
        .split(/\.handle\(\s*"/)
        .slice(1)
        .filter((segment) => raw.test(segment))
        .map((segment) => `${group}.${segment.slice(0, segment.indexOf('"'))}`)
    })
}

let fake: FakeOpenAi
let server: TestServer
const covered = new Set<string>()

/** Sends a request, expects `status`, and decodes the body with the endpoint's declared success schema. */
const answer = async (method: string, path: string, body?: unknown, status = 200): Promise<any> => {
  const endpoint = endpointOf(method, path)
  const response = await server.request(method, path, body === undefined ? {} : { body })
  const json = await response.json()
  expect({ path, status: response.status }).toEqual({ path, status })
  const decoded = Schema.decodeUnknownEither(endpoint.success, { onExcessProperty: "error" })(json)
  if (Either.isLeft(decoded)) {
    throw new Error(`${method} ${path}: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`)
  }
  covered.add(`${endpoint.group}.${endpoint.name}`)
  return json
}

beforeAll(async () => {
  fake = startFakeOpenAi(() => ({ content: JSON.stringify({ score: 0.75, reason: "fine" }) }))
  server = await startTestServer({
    TAPEDECK_LLM_BASE_URL: fake.baseUrl,
    TAPEDECK_LLM_API_KEY: "sk-fake",
    TAPEDECK_LLM_RETRY_BASE_MS: "5",
    TAPEDECK_DEFAULT_JUDGE_MODEL: "gpt-4.1-mini"
  })
}, 60_000)
afterAll(async () => {
  await server.stop()
  await fake.stop()
})

describe("raw answers match the declared success schema", () => {
  test("traces, sessions, search, forks, evaluations, API keys, batch, enforcement checks and discovery", async () => {
    const sessionId = `s-${uuid()}`
    const rootSpan = span({ span_type: "action", name: "agent", agent_id: "planner" })
    const plan = span({ parent_id: rootSpan.id, name: "plan", model: "gpt-4o-mini", input: "where?", output: "Lisbon" })
    const t = trace({
      name: "raw answers",
      session_id: sessionId,
      status: "completed",
      input: "Book a flight to Lisbon",
      output: "Booked",
      spans: [
        rootSpan,
        plan,
        span({ parent_id: rootSpan.id, span_type: "tool_call", name: "search", output: { results: 3 } })
      ]
    })
    await answer("POST", "/api/v1/traces", t)

    await answer("GET", "/api/v1/traces?limit=5")
    await answer("GET", `/api/v1/traces/${t.id}`)

    await answer("GET", "/api/v1/sessions?limit=5")
    await answer("GET", `/api/v1/sessions/${encodeURIComponent(sessionId)}`)
    await answer("GET", `/api/v1/sessions/${encodeURIComponent(sessionId)}/graph`)

    await answer("POST", "/api/v1/search", { query: "flight to Lisbon" })

    const fork = await answer("POST", "/api/v1/forks", {
      trace_id: t.id,
      fork_point_span_id: plan.id,
      modified_input: "Porto"
    })
    await answer("GET", `/api/v1/forks/${fork.id}`)
    await answer("GET", "/api/v1/forks?limit=5")

    const criteria = [{ name: "correct", description: "the answer is correct", weight: 2 }]
    const evaluation = await answer("POST", "/api/v1/evaluations", { name: "quality", criteria })
    await answer("GET", "/api/v1/evaluations?limit=5")
    await answer("GET", `/api/v1/evaluations/${evaluation.id}`)
    await answer("POST", `/api/v1/evaluations/${evaluation.id}/run`, { trace_ids: [t.id] })
    await answer("POST", `/api/v1/evaluations/${evaluation.id}/gate`, { trace_ids: [t.id], threshold: 0.5 })

    await answer("POST", "/api/v1/api-keys", { name: "raw answers" })

    await answer("POST", "/api/v1/batch", { operations: [{ method: "GET", path: `/api/v1/traces/${t.id}` }] })
    await answer(
      "POST",
      "/api/v1/batch",
      { async: true, operations: [{ method: "GET", path: "/api/v1/traces?limit=1" }] },
      202
    )

    const project = uuid()
    const denylist = { type: "tool_denylist", name: "raw", project_id: project, params: { patterns: ["rm"] } }
    expect((await server.request("POST", "/api/v1/guardrails", { body: denylist })).status).toBe(200)
    const approval = { type: "require_approval", name: "raw", project_id: project, params: { tool_patterns: ["pay"] } }
    expect((await server.request("POST", "/api/v1/guardrails", { body: approval })).status).toBe(200)
    const check = (tool_name: string) =>
      answer("POST", "/api/v1/enforcement/check", { run_id: `raw-${uuid()}`, project_id: project, tool_name })
    expect((await check("ls")).verdict).toBe("allow")
    expect((await check("rm")).verdict).toBe("block")
    expect((await check("pay")).hold_id).toBeString()

    await answer("GET", "/.well-known/oauth-protected-resource")
    await answer("GET", "/.well-known/oauth-authorization-server")
  }, 120_000)

  test("every handler that answers raw is covered above", () => {
    const raw = rawHandlers()
    expect(raw.length).toBeGreaterThan(0)
    expect(raw.filter((handler) => !covered.has(handler))).toEqual([])
  })
})
