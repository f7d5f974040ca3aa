import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Data, Effect, Schema } from "effect"
import { guardrailType } from "tapedeck"
import { freshDatabase, startServer, type TestServer } from "tapedeck/testing"
import { ToolQuotaLive } from "./ToolQuota.ts"

const scratch = mkdtempSync(join(tmpdir(), "tapedeck-quota-"))
const TIMEOUT_MS = 300

class DirectoryDown extends Data.TaggedError("DirectoryDown")<{ readonly message: string }> {}

/** Evaluators that go wrong in each way an extension's code can: all must block (fail closed). */
const Empty = Schema.Struct({})
const Broken = [
  guardrailType({
    type: "fails_typed",
    description: "Fails with a typed error",
    params: Empty,
    evaluate: () => Effect.fail(new DirectoryDown({ message: "the quota directory is down" }))
  }),
  guardrailType({
    type: "dies",
    description: "Dies (a defect inside the effect)",
    params: Empty,
    evaluate: () => Effect.die(new Error("evaluator crashed"))
  }),
  guardrailType({
    type: "throws",
    description: "Throws before returning an effect",
    params: Empty,
    evaluate: () => {
      throw new Error("thrown out of evaluate")
    }
  }),
  guardrailType({
    type: "hangs",
    description: "Never answers",
    params: Empty,
    evaluate: () => Effect.never
  }),
  // Not broken: reports the run's counters it is given, to show what an evaluator sees.
  guardrailType({
    type: "run_report",
    description: "Blocks the tool `report` with the run's counters as the reason",
    params: Empty,
    evaluate: ({ request, run }) =>
      request.tool_name !== "report"
        ? Effect.succeed({ verdict: "allow" } as const)
        : Effect.map(run, (r) => ({
            verdict: "block" as const,
            reason: `spent ${r.spent_usd} tokens ${r.tokens} recent ${r.recent.map((a) => a.tool).join(",")}`
          }))
  }),
  // Params whose JSON form differs from what the evaluator gets (a number sent as a string).
  guardrailType({
    type: "token_cap_text",
    description: "Blocks a check proposing more tokens than max (given as a string)",
    params: Schema.Struct({ max: Schema.NumberFromString }),
    example: { max: "100" },
    evaluate: ({ params, request }) =>
      Effect.succeed(
        (request.proposed_tokens ?? 0) > params.max
          ? ({ verdict: "block", reason: `more than ${params.max} tokens` } as const)
          : ({ verdict: "allow" } as const)
      )
  }),
  guardrailType({
    type: "answers_nonsense",
    description: "Answers something that is not a verdict",
    params: Empty,
    evaluate: () => Effect.succeed({ verdict: "maybe" } as never)
  })
]

let server: TestServer
beforeAll(async () => {
  server = await startServer({
    extensions: [ToolQuotaLive, ...Broken],
    env: { TAPEDECK_ENFORCEMENT_TIMEOUT_MS: String(TIMEOUT_MS) }
  })
})
afterAll(async () => {
  await server?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

interface Decision {
  verdict: "allow" | "block" | "hold"
  policy_id: string | null
  policy_type: string | null
  reason: string
  hold_id?: string
}

const create = async (body: unknown, key?: string) => {
  const r = await server.request("POST", "/api/v1/guardrails", { body, ...(key ? { key } : {}) })
  return { status: r.status, body: (await r.json()) as Record<string, unknown> }
}
const createOk = async (body: unknown, key?: string) => {
  const r = await create(body, key)
  expect(r.status).toBe(200)
  return r.body as { id: string; type: string }
}
const check = async (body: Record<string, unknown>, key?: string): Promise<Decision> => {
  const r = await server.request("POST", "/api/v1/enforcement/check", { body, ...(key ? { key } : {}) })
  expect(r.status).toBe(200)
  return (await r.json()) as Decision
}
const until = async <A>(what: string, get: () => Promise<A | undefined>, ms = 20_000): Promise<A> => {
  const end = Date.now() + ms
  while (Date.now() < end) {
    const got = await get()
    if (got !== undefined) return got
    await Bun.sleep(50)
  }
  throw new Error(`timed out waiting for ${what}`)
}
const decisionsOf = async (runId: string, key?: string) => {
  const r = await server.request("GET", `/api/v1/enforcement/decisions?run_id=${runId}`, key ? { key } : {})
  return ((await r.json()) as { items: Array<Record<string, unknown>> }).items
}

describe(`a custom guardrail type composed into a real server (${process.env.TEST_DATABASE_URL ? "postgresql" : "pglite"})`, () => {
  test("the quota allows until it is reached, across runs, then blocks; other tools and accounts are not counted", async () => {
    const policy = await createOk({
      type: "tool_quota",
      name: "3 emails a day",
      params: { tool: "send_email", max_per_day: 3 }
    })
    expect(policy.type).toBe("tool_quota")
    // Three runs share the account's quota.
    for (const run of ["q-run-1", "q-run-2", "q-run-1"]) {
      expect((await check({ run_id: run, tool_name: "send_email" })).verdict).toBe("allow")
    }
    const blocked = await check({ run_id: "q-run-3", tool_name: "send_email" })
    expect(blocked).toMatchObject({ verdict: "block", policy_id: policy.id, policy_type: "tool_quota" })
    expect(blocked.reason).toContain("already called 3 times today")
    // Another tool is not the quota's business, and a block is not counted as a call.
    expect((await check({ run_id: "q-run-3", tool_name: "web_search" })).verdict).toBe("allow")
    expect((await check({ run_id: "q-run-4", tool_name: "send_email" })).verdict).toBe("block")
    // globex has no such guardrail: its calls are its own.
    expect((await check({ run_id: "q-run-1", tool_name: "send_email" }, server.keys.globex)).verdict).toBe("allow")
    // Recorded as a built-in's decision: verdict, policy, reason.
    const recorded = await until("the block's record", async () =>
      (await decisionsOf("q-run-3")).find((d) => d.verdict === "block")
    )
    expect(recorded).toMatchObject({ policy_id: policy.id, policy_type: "tool_quota", tool_name: "send_email" })
    // Raising the quota (PATCH, params checked by the type's schema) lets the next call through.
    const patched = await server.request("PATCH", `/api/v1/guardrails/${policy.id}`, {
      body: { params: { tool: "send_email", max_per_day: 4 } }
    })
    expect(patched.status).toBe(200)
    expect((await check({ run_id: "q-run-5", tool_name: "send_email" })).verdict).toBe("allow")
    expect((await check({ run_id: "q-run-5", tool_name: "send_email" })).verdict).toBe("block")
    // Disabled: not applied.
    await server.request("PATCH", `/api/v1/guardrails/${policy.id}`, { body: { enabled: false } })
    expect((await check({ run_id: "q-run-5", tool_name: "send_email" })).verdict).toBe("allow")
  })

  test("past a hold-variant quota the action is held; the holds API approves (once) or denies it", async () => {
    const key = server.keys.globex
    const policy = await createOk(
      { type: "tool_quota", params: { tool: "wire_money", max_per_day: 1, hold: true } },
      key
    )
    const action = { run_id: "h-run", tool_name: "wire_money", tool_args_hash: "a1" }
    expect((await check(action, key)).verdict).toBe("allow")
    const held = await check(action, key)
    expect(held).toMatchObject({ verdict: "hold", policy_id: policy.id, policy_type: "tool_quota" })
    expect(held.hold_id).toBeString()
    // While pending, the same action answers the same hold.
    const again = await check(action, key)
    expect(again).toMatchObject({ verdict: "hold", hold_id: held.hold_id })
    const pending = await server.request("GET", "/api/v1/enforcement/holds?status=pending", { key })
    const items = ((await pending.json()) as { items: Array<{ id: string; policyId: string }> }).items
    expect(items.find((h) => h.id === held.hold_id)?.policyId).toBe(policy.id)
    const approve = await server.request("POST", `/api/v1/enforcement/holds/${held.hold_id}/approve`, {
      key,
      body: { reason: "checked with finance" }
    })
    expect(approve.status).toBe(200)
    // Approved: allowed once, and the next one past the quota is held again (a new hold).
    expect((await check(action, key)).verdict).toBe("allow")
    const next = await check(action, key)
    expect(next.verdict).toBe("hold")
    expect(next.hold_id).not.toBe(held.hold_id)
    const deny = await server.request("POST", `/api/v1/enforcement/holds/${next.hold_id}/deny`, {
      key,
      body: { reason: "not today" }
    })
    expect(deny.status).toBe(200)
    const denied = await check(action, key)
    expect(denied).toMatchObject({ verdict: "block", policy_id: policy.id, hold_id: next.hold_id })
    expect(denied.reason).toContain("not today")
  })

  test("an evaluator that fails, dies, throws or answers nonsense blocks through the fail-closed channel", async () => {
    const cases: Array<[string, string]> = [
      ["fails_typed", "the quota directory is down"],
      ["dies", "evaluator crashed"],
      ["throws", "thrown out of evaluate"],
      ["answers_nonsense", 'verdict "maybe"']
    ]
    for (const [type, said] of cases) {
      const project = crypto.randomUUID()
      const policy = await createOk({ type, project_id: project, params: {} })
      const runId = `broken-${type}`
      const decision = await check({ run_id: runId, project_id: project, tool_name: "anything" })
      // The same answer as when the policy store cannot be read: block, no policy named, "policy state unavailable".
      expect(decision).toMatchObject({ verdict: "block", policy_id: null, policy_type: null })
      expect(decision.reason).toStartWith("policy state unavailable: ")
      expect(decision.reason).toContain(`guardrail ${policy.id} (${type}) failed`)
      expect(decision.reason).toContain(said)
      const recorded = await until(`the fail-closed record of ${type}`, async () => (await decisionsOf(runId))[0])
      expect(recorded).toMatchObject({ verdict: "block", reason: decision.reason })
      // Other projects' checks are not affected.
      expect((await check({ run_id: runId, project_id: crypto.randomUUID(), tool_name: "anything" })).verdict).toBe(
        "allow"
      )
    }
  })

  test("an evaluator sees the run's counters as the built-in types do (allowed actions only)", async () => {
    const project = crypto.randomUUID()
    await createOk({ type: "run_report", project_id: project, params: {} })
    await createOk({ type: "tool_denylist", project_id: project, params: { patterns: ["rm"] } })
    const at = { run_id: "counters-run", project_id: project }
    expect((await check({ ...at, tool_name: "a", proposed_usd: 0.25, proposed_tokens: 10 })).verdict).toBe("allow")
    expect((await check({ ...at, tool_name: "rm", proposed_usd: 5, proposed_tokens: 99 })).verdict).toBe("block")
    expect((await check({ ...at, tool_name: "b", proposed_usd: 0.5, proposed_tokens: 5 })).verdict).toBe("allow")
    const report = await check({ ...at, tool_name: "report" })
    expect(report).toMatchObject({
      verdict: "block",
      policy_type: "run_report",
      reason: "spent 0.75 tokens 15 recent a,b"
    })
  })

  test("params are stored in their JSON form and decoded for the evaluator", async () => {
    const project = crypto.randomUUID()
    const policy = await createOk({ type: "token_cap_text", project_id: project, params: { max: "10" } })
    expect((policy as unknown as { params: unknown }).params).toEqual({ max: "10" })
    const at = { run_id: "cap-run", project_id: project }
    expect((await check({ ...at, proposed_tokens: 10 })).verdict).toBe("allow")
    expect(await check({ ...at, proposed_tokens: 11 })).toMatchObject({
      verdict: "block",
      reason: "more than 10 tokens"
    })
    const patched = await server.request("PATCH", `/api/v1/guardrails/${policy.id}`, {
      body: { params: { max: "20" } }
    })
    expect(((await patched.json()) as { params: unknown }).params).toEqual({ max: "20" })
    expect((await check({ ...at, proposed_tokens: 11 })).verdict).toBe("allow")
    expect((await create({ type: "token_cap_text", params: { max: 10 } })).status).toBe(400)
  })

  test("an evaluator that never answers blocks at the check's deadline", async () => {
    const project = crypto.randomUUID()
    await createOk({ type: "hangs", project_id: project, params: {} })
    for (let i = 0; i < 3; i++) {
      const decision = await check({ run_id: "hang-run", project_id: project, tool_name: "t", proposed_usd: 1 })
      expect(decision).toMatchObject({
        verdict: "block",
        policy_id: null,
        reason: `policy state unavailable: no answer within ${TIMEOUT_MS} ms`
      })
    }
    const recorded = await until("the records", async () => {
      const items = await decisionsOf("hang-run")
      return items.length === 3 ? items : undefined
    })
    expect(recorded.every((d) => d.verdict === "block")).toBe(true)
  })

  test("params are checked with the type's schema (400 with the error body), and unknown types are refused", async () => {
    for (const params of [
      { tool: "x" },
      { tool: "x", max_per_day: -1 },
      { tool: "x", max_per_day: 1, extra: 1 },
      "x"
    ]) {
      const r = await create({ type: "tool_quota", params })
      expect(r.status).toBe(400)
      expect(r.body).toMatchObject({ code: "validation_failed", retryable: false })
      expect(String(r.body.error)).toContain("params")
    }
    const missing = await create({ type: "tool_quota", params: { tool: "x" } })
    expect(String(missing.body.error)).toContain("max_per_day")
    expect((await create({ type: "no_such_type", params: {} })).status).toBe(400)
    // PATCH checks the new params against the guardrail's type too.
    const policy = await createOk({ type: "tool_quota", enabled: false, params: { tool: "x", max_per_day: 1 } })
    const patched = await server.request("PATCH", `/api/v1/guardrails/${policy.id}`, {
      body: { params: { tool: "x", max_per_day: "lots" } }
    })
    expect(patched.status).toBe(400)
    expect(await patched.json()).toMatchObject({ code: "validation_failed", retryable: false })
    expect(
      String(
        (
          (await (await server.request("GET", `/api/v1/guardrails/${policy.id}`)).json()) as {
            params: { max_per_day: number }
          }
        ).params.max_per_day
      )
    ).toBe("1")
    // The built-in types are checked as before.
    expect((await create({ type: "budget_usd", params: { max_usd: -1 } })).status).toBe(400)
  })

  test("OpenAPI shows the installed types and their params schemas", async () => {
    const spec = (await (await server.request("GET", "/openapi.json", { key: null })).json()) as Record<string, any>
    const text = JSON.stringify(spec)
    // The request body of POST /api/v1/guardrails: a union (nested anyOf) with one member per type.
    const members: Array<any> = []
    const walk = (node: any): void => {
      if (node?.$ref) walk(spec.components.schemas[node.$ref.split("/").pop()])
      else if (Array.isArray(node?.anyOf ?? node?.oneOf)) for (const m of node.anyOf ?? node.oneOf) walk(m)
      else members.push(node)
    }
    walk(spec.paths["/api/v1/guardrails"].post.requestBody.content["application/json"].schema)
    const quota = members.find((m) => m.properties?.type?.enum?.[0] === "tool_quota")
    expect(quota).toBeDefined()
    expect(quota.required).toContain("params")
    expect(JSON.stringify(quota.properties.params)).toContain("max_per_day")
    expect(text).toContain("At most max_per_day allowed calls of one tool per UTC day")
    for (const type of ["budget_usd", "require_approval", "hangs"]) {
      expect(members.some((m) => m.properties?.type?.enum?.[0] === type)).toBe(true)
    }
  })

  test("a type named like a built-in, installed twice or malformed is refused at start", async () => {
    const named = (type: string) =>
      guardrailType({ type, description: "x", params: Empty, evaluate: () => Effect.succeed({ verdict: "allow" }) })
    for (const extensions of [[named("budget_usd")], [ToolQuotaLive, named("tool_quota")], [named("Not A Name")]]) {
      const error = await startServer({ extensions }).then(
        async (s) => {
          await s.stop()
          return undefined
        },
        (e: unknown) => e
      )
      expect(String(error)).toContain("refused")
    }
  })

  test("the quota is counted in the database: across instances (PostgreSQL), across a restart (both)", async () => {
    const database = await freshDatabase()
    const env = database.backend === "pglite" ? { TAPEDECK_DATA_DIR: join(scratch, "shared") } : database.env
    const call = async (s: TestServer, run: string) => {
      const r = await s.request("POST", "/api/v1/enforcement/check", { body: { run_id: run, tool_name: "deploy" } })
      return ((await r.json()) as Decision).verdict
    }
    try {
      const a = await startServer({ extensions: [ToolQuotaLive], env })
      const seen: Array<string> = []
      try {
        const r = await a.request("POST", "/api/v1/guardrails", {
          body: { type: "tool_quota", params: { tool: "deploy", max_per_day: 4 } }
        })
        expect(r.status).toBe(200)
        seen.push(await call(a, "i-1"), await call(a, "i-2"))
        if (database.backend === "postgresql") {
          // A second instance over the same database, both serving at once: their calls share one count.
          const b = await startServer({ extensions: [ToolQuotaLive], env })
          try {
            seen.push(await call(b, "i-3"), await call(a, "i-4"), await call(b, "i-5"), await call(a, "i-6"))
          } finally {
            await b.stop()
          }
        }
      } finally {
        await a.stop()
      }
      // Restarted over the same data: the day's calls are still counted.
      const c = await startServer({ extensions: [ToolQuotaLive], env })
      try {
        while (seen.length < 8) seen.push(await call(c, `i-${seen.length + 1}`))
      } finally {
        await c.stop()
      }
      expect(seen).toEqual(["allow", "allow", "allow", "allow", "block", "block", "block", "block"])
    } finally {
      await database.drop()
    }
  })

  test("a stored policy whose type is no longer installed blocks (fail closed)", async () => {
    const database = await freshDatabase()
    const env = database.backend === "pglite" ? { TAPEDECK_DATA_DIR: join(scratch, "data") } : database.env
    try {
      const first = await startServer({ extensions: [ToolQuotaLive], env })
      let policyId: string
      try {
        const r = await first.request("POST", "/api/v1/guardrails", {
          body: { type: "tool_quota", params: { tool: "send_email", max_per_day: 5 } }
        })
        expect(r.status).toBe(200)
        policyId = ((await r.json()) as { id: string }).id
      } finally {
        await first.stop()
      }
      const second = await startServer({ env })
      try {
        const r = await second.request("POST", "/api/v1/enforcement/check", { body: { run_id: "r", tool_name: "x" } })
        expect(await r.json()).toMatchObject({
          verdict: "block",
          policy_id: policyId,
          policy_type: "tool_quota",
          reason: `policy ${policyId} has type 'tool_quota', which no installed extension provides`
        })
      } finally {
        await second.stop()
      }
    } finally {
      await database.drop()
    }
  })
})
