import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type ReplayContext, type Run, Tapedeck, wrapModel, wrapTool } from "tapedeck/sdk"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"

// SDK-mode replay end to end: an agent recorded with the SDK, forked, and re-run by the same process
// through connectReplay, with the fork's mocked tool output applied.
let server: TestServer
beforeAll(async () => {
  server = await startTestServer({ TAPEDECK_REPLAY_MONTHLY_ALLOWANCE: "100" })
})
afterAll(() => server.stop())

const AGENT = "weekend-planner"

type Tool = <A extends ReadonlyArray<unknown>, R>(
  name: string,
  fn: (...args: A) => R | Promise<R>
) => (...args: A) => Promise<R>

/** The agent: asks a (local) model where to go, looks the place up with a tool, and answers. */
const planWeekend = async (run: Run, request: string, tool: Tool) => {
  const model = wrapModel(
    run,
    "gpt-4o-mini",
    async (prompt: string) => ({
      content: `Go to ${prompt.split(" ").at(-1)}`,
      usage: { prompt_tokens: 12, completion_tokens: 4 }
    }),
    { name: "plan" }
  )
  const lookup = tool("lookup_city", async (city: string) => ({ city, rating: 3 }))
  const plan = await model(request)
  const info = await lookup(plan.content.split(" ").at(-1)!)
  return { plan: plan.content, info }
}

describe("connectReplay", () => {
  test("a recorded SDK run is forked and replayed by the connected SDK, with mocked tools, into a sandbox trace", async () => {
    const tapedeck = new Tapedeck({ baseUrl: server.url, apiKey: KEY_A, flushIntervalMs: 20 })
    const run = tapedeck.startRun({ name: AGENT, input: "Weekend in Lisbon" })
    const output = await planWeekend(run, "Weekend in Lisbon", (name, fn) => wrapTool(run, name, fn as never) as never)
    await run.finish({ output })
    await tapedeck.flush()

    const recorded = (await (await server.get(`/api/v1/traces/${run.id}`)).json()) as any
    const plan = recorded.spans.find((s: any) => s.name === "plan")
    expect(plan.span_type).toBe("llm_call")

    const replays = tapedeck.connectReplay({
      agents: {
        [AGENT]: (context: ReplayContext) => planWeekend(context.run, String(context.modifiedInput), context.tool)
      }
    })
    await replays.ready
    const fork = (await (
      await server.post("/api/v1/forks", {
        trace_id: run.id,
        fork_point_span_id: plan.id,
        modified_input: "Weekend in Porto",
        mock_outputs: { lookup_city: { city: "Porto", rating: 5, mocked: true } }
      })
    ).json()) as any
    const started = (await (await server.post(`/api/v1/forks/${fork.id}/replay`, {})).json()) as any
    expect(started).toMatchObject({ status: "replaying", mode: "sdk" })

    let state: any
    for (let i = 0; i < 100; i++) {
      state = await (await server.get(`/api/v1/forks/${fork.id}`)).json()
      if (state.status !== "replaying") break
      await Bun.sleep(50)
    }
    expect(state).toMatchObject({ status: "completed", resultTraceId: started.result_trace_id })
    const result = (await (await server.get(`/api/v1/traces/${started.result_trace_id}`)).json()) as any
    expect(result.input).toBe("Weekend in Porto")
    expect(result.status).toBe("completed")
    expect(result.environment).toBe("sandbox")
    expect(result.output).toEqual({ plan: "Go to Porto", info: { city: "Porto", rating: 5, mocked: true } })
    const lookup = result.spans.find((s: any) => s.name === "lookup_city")
    expect(lookup.output).toEqual({ city: "Porto", rating: 5, mocked: true })
    const sandbox = (await (await server.get("/api/v1/traces?env=sandbox&limit=100")).json()) as any
    expect(sandbox.items.map((t: any) => t.id)).toContain(started.result_trace_id)

    replays.close()
    await tapedeck.close()
  }, 60_000)
})
