import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { KEY_A, KEY_B, startTestServer, type TestServer } from "../support/TestServer.ts"
import { span, trace } from "../support/Fixtures.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_REPLAY_SDK_GRACE_SECONDS: "1", TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "1000" })
})
afterAll(() => server.stop())

const used = () =>
  server.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ used: number }>`
    SELECT coalesce(sum(u.used), 0)::int AS used FROM replay_usage u JOIN accounts a ON a.id = u.account_id WHERE a.name = 'acme'`
      return rows[0]!.used
    }).pipe(Effect.orDie)
  )

/** A raw protocol client: the messages it received, in order, and a way to wait for one. */
const connect = async (key: string | null, query = "") => {
  const url = `${server.url.replace("http", "ws")}/ws/v1/replay${query}`
  const socket = new WebSocket(url, key === null ? undefined : ({ headers: { "x-service-key": key } } as never))
  const received: Array<any> = []
  socket.addEventListener("message", (event) => received.push(JSON.parse(String(event.data))))
  const closed = new Promise<number>((resolve) => socket.addEventListener("close", (e) => resolve(e.code)))
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve())
    socket.addEventListener("error", () => reject(new Error("socket error")))
  })
  const next = async (type: string) => {
    for (let i = 0; i < 200; i++) {
      const found = received.find((m) => m.type === type)
      if (found) {
        received.splice(received.indexOf(found), 1)
        return found
      }
      await Bun.sleep(25)
    }
    throw new Error(`no '${type}' message; got ${JSON.stringify(received)}`)
  }
  return { socket, next, closed, received, send: (m: unknown) => socket.send(JSON.stringify(m)) }
}

const recordedFork = async (agent: string, key = KEY_A) => {
  const root = span({ span_type: "action", name: "run", agent_id: agent })
  const plan = span({
    parent_id: root.id,
    name: "plan",
    model: "gpt-4o-mini",
    input: {
      messages: [{ role: "user", content: "Lisbon" }],
      tools: [{ type: "function", function: { name: "search" } }],
      temperature: 0.2
    }
  })
  const t = trace({ name: agent, spans: [root, plan] })
  expect((await server.post("/api/v1/traces", t, key)).status).toBe(200)
  const fork = (await (
    await server.post(
      "/api/v1/forks",
      { trace_id: t.id, fork_point_span_id: plan.id, modified_input: "Porto", mock_outputs: { search: 1 } },
      key
    )
  ).json()) as any
  return { t, plan, fork }
}

describe("SDK-mode replay over /ws/v1/replay", () => {
  test("a connected SDK that registered the agent gets the replay command and completes it", async () => {
    const sdk = await connect(KEY_A)
    sdk.send({ type: "register", agents: ["travel-sdk"] })
    expect((await sdk.next("registered")).agents).toEqual(["travel-sdk"])
    const { fork, plan, t } = await recordedFork("travel-sdk")

    const response = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(response).toMatchObject({ fork_id: fork.id, status: "replaying", mode: "sdk" })
    const command = await sdk.next("replay")
    expect(command).toMatchObject({
      execution_id: response.execution_id,
      agent: "travel-sdk",
      fork_point_span_id: plan.id,
      modified_input: "Porto",
      mock_outputs: { search: 1 },
      result_trace_id: response.result_trace_id
    })
    expect(command.source_trace.id).toBe(t.id)
    expect(command.source_trace.spans.length).toBe(2)
    // The tools and parameters the model call was recorded with, for the SDK to send again.
    expect(command.model_requests).toEqual({
      [plan.id]: { tools: [{ type: "function", function: { name: "search" } }], temperature: 0.2 }
    })
    expect((await (await server.get(`/api/v1/forks/${fork.id}`)).json()) as any).toMatchObject({
      status: "replaying",
      mode: "sdk"
    })

    // The SDK re-runs its agent and sends the result trace through the Traces API with the given id.
    const result = {
      id: command.result_trace_id,
      started_at: "2026-01-01T00:00:00Z",
      status: "completed",
      input: "Porto",
      metadata: { environment: "sandbox" }
    }
    expect(await (await server.post("/api/v1/traces", result)).json()).toMatchObject({
      id: result.id,
      status: "created"
    })
    sdk.send({
      type: "replay_finished",
      execution_id: command.execution_id,
      status: "completed",
      faithful_reexec: 1,
      fidelity_caveats: ["tool 'search' mocked"]
    })
    await sdk.next("finished_ack")
    expect((await (await server.get(`/api/v1/forks/${fork.id}`)).json()) as any).toMatchObject({
      status: "completed",
      resultTraceId: result.id
    })
    // Resuming after a crash: the repeated create of the finished result is "resumed".
    expect(await (await server.post("/api/v1/traces", result)).json()).toEqual({ id: result.id, status: "resumed" })
    sdk.socket.close()
  })

  test("without a matching SDK the replay runs on the server; another account's SDK never gets the command", async () => {
    const other = await connect(KEY_B)
    other.send({ type: "register", agents: ["shared-name"] })
    await other.next("registered")
    const { fork } = await recordedFork("shared-name", KEY_A)
    const response = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(response.mode).toBe("server")
    await Bun.sleep(300)
    expect(other.received.filter((m) => m.type === "replay")).toEqual([])
    other.socket.close()
  })

  test("an SDK that disconnects mid-replay: after the grace period the generation fails and the unit is not spent", async () => {
    const sdk = await connect(KEY_A)
    sdk.send({ type: "register", agents: ["flaky-agent"] })
    await sdk.next("registered")
    const { fork } = await recordedFork("flaky-agent")
    const before = await used()
    const response = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(response.mode).toBe("sdk")
    await sdk.next("replay")
    sdk.socket.close()
    let state: any
    for (let i = 0; i < 100; i++) {
      state = await (await server.get(`/api/v1/forks/${fork.id}`)).json()
      if (state.status !== "replaying") break
      await Bun.sleep(100)
    }
    expect(state.status).toBe("failed")
    expect(state.error).toContain("disconnected")
    expect(await used()).toBe(before)
  })

  test("a reconnecting SDK resumes its execution with the same id", async () => {
    const first = await connect(KEY_A)
    first.send({ type: "register", agents: ["resumable"] })
    await first.next("registered")
    const { fork } = await recordedFork("resumable")
    const response = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    await first.next("replay")
    first.socket.close()
    const second = await connect(KEY_A)
    second.send({ type: "register", agents: ["resumable"] })
    second.send({ type: "resume", execution_ids: [response.execution_id] })
    await second.next("registered")
    await Bun.sleep(2500)
    expect((await (await server.get(`/api/v1/forks/${fork.id}`)).json()) as any).toMatchObject({ status: "replaying" })
    second.send({ type: "replay_finished", execution_id: response.execution_id, status: "completed" })
    await second.next("finished_ack")
    expect((await (await server.get(`/api/v1/forks/${fork.id}`)).json()) as any).toMatchObject({ status: "completed" })
    second.socket.close()
  })

  test("the socket needs credentials; garbage messages get an error, not a disconnect", async () => {
    const refused = await fetch(`${server.url}/ws/v1/replay`)
    expect(refused.status).toBe(401)
    const viaToken = await connect(null, `?token=${KEY_A}`)
    viaToken.send("not json")
    expect((await viaToken.next("error")).message).toContain("protocol")
    viaToken.send({ type: "ping" })
    await viaToken.next("pong")
    viaToken.socket.close()
  })
})
