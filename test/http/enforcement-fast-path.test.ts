import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import net from "node:net"
import { FastCheck as fc } from "effect"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { uuid } from "../support/Fixtures.ts"

/**
 * The check's fast path (src/http/CheckFastPath.ts) answers `POST /api/v1/enforcement/check` beside the API router.
 * The same route with a query string is not taken by it and goes through the router: every answer must be the same
 * whichever way a check went.
 */
const FAST = "/api/v1/enforcement/check"
const VIA_API = "/api/v1/enforcement/check?via=api"
const RATE_LIMIT = 40

let server: TestServer
beforeAll(async () => {
  server = await startTestServer({
    TAPEDECK_RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT),
    TAPEDECK_BODY_DEADLINE_MS: "3000",
    TAPEDECK_BODY_GRACE_MS: "1500",
    TAPEDECK_BODY_MIN_BYTES_PER_SECOND: "1024"
  })
})
afterAll(() => server.stop())

interface Answer {
  readonly status: number
  readonly contentType: string | null
  readonly retryAfter: string | null
  readonly body: unknown
}

const post = async (path: string, body: string, headers: Record<string, string>): Promise<Answer> => {
  const response = await fetch(`${server.url}${path}`, { method: "POST", headers, body })
  const text = await response.text()
  let parsed: unknown = text
  try {
    parsed = JSON.parse(text)
  } catch {
    // not JSON: compared as text
  }
  return {
    status: response.status,
    contentType: response.headers.get("content-type"),
    retryAfter: response.headers.get("retry-after"),
    body: parsed
  }
}

const json = (key: string) => ({ "content-type": "application/json", "x-service-key": key })

/** Every request a test sends counts against its own key's rate limit: each test makes keys of its own. */
const newKey = async () => {
  const response = await fetch(`${server.url}/api/v1/api-keys`, {
    method: "POST",
    headers: json(KEY_B),
    body: JSON.stringify({ name: `fast path ${uuid()}` })
  })
  expect(response.status).toBe(200)
  return ((await response.json()) as { id: string; key: string })
}

describe("the check's fast path answers as the API route does", () => {
  test("the same checks on two runs with the same history get the same answers, whichever way they went", async () => {
    const policies = [
      { type: "budget_usd", params: { max_usd: 0.05 } },
      { type: "token_budget", params: { max_tokens: 2000 } },
      { type: "max_steps", params: { max_steps: 6 } },
      { type: "tool_denylist", params: { patterns: ["shell.*"] } },
      { type: "loop_breaker", params: { max_repeats: 2 } },
      { type: "require_approval", params: { tool_patterns: ["wire_*"] } }
    ]
    const project = uuid()
    for (const p of policies) {
      const response = await fetch(`${server.url}/api/v1/guardrails`, { method: "POST", headers: json(KEY_B), body: JSON.stringify({ ...p, project_id: project }) })
      expect(response.status).toBe(200)
    }
    const action = fc.record({
      tool_name: fc.constantFrom("search", "shell.exec", "read_file", "wire_money"),
      tool_args_hash: fc.constantFrom("a", "b"),
      proposed_usd: fc.constantFrom(0, 0.01, 0.02),
      proposed_tokens: fc.integer({ min: 0, max: 900 }),
      step_index: fc.integer({ min: 0, max: 8 })
    }, { requiredKeys: ["tool_name"] })
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 8 }), async (actions) => {
        const { key } = await newKey()
        const fastRun = uuid()
        const apiRun = uuid()
        for (const a of actions) {
          const fast = await post(FAST, JSON.stringify({ run_id: fastRun, project_id: project, ...a }), json(key))
          const api = await post(VIA_API, JSON.stringify({ run_id: apiRun, project_id: project, ...a }), json(key))
          // A hold names its own approval: the rest of the answer is the same.
          const comparable = (x: Answer) => ({ ...x, body: { ...(x.body as object), hold_id: typeof (x.body as any).hold_id } })
          expect(comparable(fast)).toEqual(comparable(api))
          expect(fast.status).toBe(200)
        }
      }),
      { numRuns: 15 }
    )
  })

  test("bodies the route refuses are refused the same way, with the same error body", async () => {
    let key = (await newKey()).key
    const body = fc.oneof(
      fc.json(),
      fc.record({ run_id: fc.oneof(fc.string(), fc.integer(), fc.constant("")), proposed_usd: fc.oneof(fc.double(), fc.string()) }, { requiredKeys: [] })
        .map((x) => JSON.stringify(x)),
      fc.string(),
      fc.constantFrom("", "{", "[]", "null", '{"run_id":"r","extra":1}', `{"run_id":"${"x".repeat(201)}"}`)
    )
    let n = 0
    await fc.assert(
      fc.asyncProperty(body, async (text) => {
        // Each sample costs two requests of the key's allowance: a fresh key before it runs out.
        if (++n % 15 === 0) key = (await newKey()).key
        const fast = await post(FAST, text, json(key))
        const api = await post(VIA_API, text, json(key))
        expect(fast).toEqual(api)
      }),
      { numRuns: 60 }
    )
  })

  test("credentials: missing, unknown, revoked, Bearer and both schemes at once are answered as the route answers them", async () => {
    const { id, key } = await newKey()
    const body = JSON.stringify({ run_id: uuid() })
    const cases: Array<Record<string, string>> = [
      { "content-type": "application/json" },
      json("svc_not_a_key_at_all_0000"),
      json(""),
      { "content-type": "application/json", authorization: `Bearer ${key}` },
      { "content-type": "application/json", authorization: "Bearer not-a-jwt" },
      { "content-type": "application/json", authorization: `Basic ${btoa(`x:${key}`)}` },
      { ...json(key), authorization: "Bearer not-a-jwt" },
      { "content-type": "text/plain", "x-service-key": key },
      { "content-type": "application/json; charset=utf-8", "x-service-key": key }
    ]
    for (const headers of cases) {
      const fast = await post(FAST, body.replace(/"}$/, `-${Object.keys(headers).length}"}`), headers)
      const api = await post(VIA_API, body.replace(/"}$/, `-${Object.keys(headers).length}"}`), headers)
      expect({ headers, ...fast }).toEqual({ headers, ...api })
    }
    expect((await post(FAST, body, { "content-type": "application/json", authorization: `Bearer ${key}` })).status).toBe(200)
    // Revoked: a 401 at once through either way, although the key was verified (and cached) a moment ago.
    expect((await post(FAST, body, json(key))).status).toBe(200)
    expect((await fetch(`${server.url}/api/v1/api-keys/${id}`, { method: "DELETE", headers: { "x-service-key": KEY_B } })).status).toBe(200)
    const fast = await post(FAST, body, json(key))
    const api = await post(VIA_API, body, json(key))
    expect(fast.status).toBe(401)
    expect(fast).toEqual(api)
  })

  test("the rate limit is one allowance per credential for both ways, and its 429 is the route's", async () => {
    const { key } = await newKey()
    const body = () => JSON.stringify({ run_id: uuid() })
    for (let i = 0; i < RATE_LIMIT; i++) {
      const answer = await post(i % 2 === 0 ? FAST : VIA_API, body(), json(key))
      expect(answer.status).toBe(200)
    }
    const fast = await post(FAST, body(), json(key))
    const api = await post(VIA_API, body(), json(key))
    expect(fast.status).toBe(429)
    expect(fast.retryAfter).not.toBeNull()
    expect({ ...fast, retryAfter: "n" }).toEqual({ ...api, retryAfter: "n" })
    // Another credential of the same account is not held back.
    expect((await post(FAST, body(), json(KEY_A))).status).toBe(200)
  })

  test("a check body trickling in is answered 408 with the error body, as every other route's", async () => {
    const { key } = await newKey()
    const { hostname, port } = new URL(server.url)
    const started = performance.now()
    const answer = await new Promise<{ status: number; body: any }>((resolve) => {
      const socket = net.connect(Number(port), hostname)
      let reply = ""
      socket.on("error", () => {})
      const ticker = setInterval(() => {
        if (!socket.destroyed) socket.write(" ")
      }, 300)
      const finish = () => {
        clearInterval(ticker)
        const split = reply.indexOf("\r\n\r\n")
        let body: unknown = reply.slice(split + 4)
        try {
          body = JSON.parse(reply.slice(split + 4))
        } catch {
          // kept as text
        }
        resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1] ?? 0), body })
        socket.destroy()
      }
      socket.on("data", (d) => {
        reply += d.toString()
        const split = reply.indexOf("\r\n\r\n")
        const length = /content-length: (\d+)/i.exec(reply)?.[1]
        if (split >= 0 && length !== undefined && reply.length - split - 4 >= Number(length)) finish()
      })
      socket.on("close", finish)
      socket.write(
        `POST ${FAST} HTTP/1.1\r\nHost: x\r\nx-service-key: ${key}\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n{"run_id":`
      )
    })
    expect(answer.status).toBe(408)
    expect(answer.body).toMatchObject({ code: "request_timeout", retryable: true })
    expect(performance.now() - started).toBeLessThan(3500)
  })
})
