/**
 * A fake OpenAI-compatible model for framework agents, on 127.0.0.1 (ephemeral port): the smallest agent turn
 * with one tool. While the conversation holds no tool result and the request offers the tool, it calls it
 * (`get_weather` with `{"city":"Lisbon"}`); once a tool result is there, or when no tool is offered, it answers in
 * text. It speaks both Chat Completions (`/v1/chat/completions`) and the Responses API (`/v1/responses`), each
 * as JSON or as a server-sent event stream when the request asks for `stream: true`, since frameworks differ in
 * which they use.
 */

export const WEATHER_TOOL = "get_weather"
export const FINAL_ANSWER = "It is sunny in Lisbon, 21°C."
export const TOOL_ARGUMENTS = '{"city":"Lisbon"}'

export interface ModelRequest {
  readonly path: string
  readonly body: any
}

export interface FakeAgentModel {
  /** `http://127.0.0.1:<port>/v1`, the base URL an OpenAI client is given. */
  readonly baseUrl: string
  readonly requests: ReadonlyArray<ModelRequest>
  readonly stop: () => Promise<void>
}

const toolNames = (tools: unknown): Array<string> =>
  Array.isArray(tools)
    ? tools.map((t: any) => t?.function?.name ?? t?.name).filter((n): n is string => typeof n === "string")
    : []

/** Whether this turn should call the tool: it is offered and no tool result is in the conversation yet. */
const callsTool = (path: string, body: any): boolean => {
  if (!toolNames(body?.tools).includes(WEATHER_TOOL)) return false
  if (path.endsWith("/responses")) {
    const input = Array.isArray(body?.input) ? body.input : []
    return !input.some((i: any) => i?.type === "function_call_output")
  }
  const messages = Array.isArray(body?.messages) ? body.messages : []
  return !messages.some((m: any) => m?.role === "tool")
}

const USAGE = { prompt_tokens: 30, completion_tokens: 8, total_tokens: 38 }

const chatCompletion = (body: any, tool: boolean, n: number) => ({
  id: `chatcmpl-fake-${n}`,
  object: "chat.completion",
  created: Math.floor(Date.now() / 1000),
  model: body?.model ?? "fake-model",
  choices: [
    {
      index: 0,
      message: tool
        ? {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: `call_${n}`, type: "function", function: { name: WEATHER_TOOL, arguments: TOOL_ARGUMENTS } }
            ]
          }
        : { role: "assistant", content: FINAL_ANSWER },
      finish_reason: tool ? "tool_calls" : "stop"
    }
  ],
  usage: USAGE
})

const chatChunks = (body: any, tool: boolean, n: number): Array<unknown> => {
  const base = {
    id: `chatcmpl-fake-${n}`,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model: body?.model ?? "fake-model"
  }
  const delta = tool
    ? {
        role: "assistant",
        content: null,
        tool_calls: [
          { index: 0, id: `call_${n}`, type: "function", function: { name: WEATHER_TOOL, arguments: TOOL_ARGUMENTS } }
        ]
      }
    : { role: "assistant", content: FINAL_ANSWER }
  return [
    { ...base, choices: [{ index: 0, delta, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: tool ? "tool_calls" : "stop" }] },
    { ...base, choices: [], usage: USAGE }
  ]
}

const responseOutput = (tool: boolean, n: number) =>
  tool
    ? {
        type: "function_call",
        id: `fc_${n}`,
        call_id: `call_${n}`,
        name: WEATHER_TOOL,
        arguments: TOOL_ARGUMENTS,
        status: "completed"
      }
    : {
        type: "message",
        id: `msg_${n}`,
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: FINAL_ANSWER, annotations: [] }]
      }

/** A Responses API response; like OpenAI's, it echoes the request's instructions, tools and settings. */
const response = (body: any, tool: boolean, n: number) => ({
  id: `resp_fake_${n}`,
  object: "response",
  created_at: Math.floor(Date.now() / 1000),
  status: "completed",
  model: body?.model ?? "fake-model",
  instructions: body?.instructions ?? null,
  tools: body?.tools ?? [],
  tool_choice: body?.tool_choice ?? "auto",
  parallel_tool_calls: body?.parallel_tool_calls ?? true,
  temperature: body?.temperature ?? 1,
  top_p: body?.top_p ?? 1,
  max_output_tokens: body?.max_output_tokens ?? null,
  output: [responseOutput(tool, n)],
  usage: {
    input_tokens: 30,
    output_tokens: 8,
    total_tokens: 38,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens_details: { reasoning_tokens: 0 }
  }
})

const responseEvents = (body: any, tool: boolean, n: number): Array<unknown> => {
  const done = response(body, tool, n)
  const item = done.output[0]!
  return [
    { type: "response.created", sequence_number: 0, response: { ...done, status: "in_progress", output: [] } },
    { type: "response.output_item.added", sequence_number: 1, output_index: 0, item },
    { type: "response.output_item.done", sequence_number: 2, output_index: 0, item },
    { type: "response.completed", sequence_number: 3, response: done }
  ]
}

const sse = (events: Array<unknown>, named: boolean, terminator: boolean) =>
  new Response(
    events.map((e: any) => `${named ? `event: ${e.type}\n` : ""}data: ${JSON.stringify(e)}\n\n`).join("") +
      (terminator ? "data: [DONE]\n\n" : ""),
    { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } }
  )

export const startFakeAgentModel = (): FakeAgentModel => {
  const requests: Array<ModelRequest> = []
  let n = 0
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname
      const text = await req.text()
      let body: any
      try {
        body = text === "" ? undefined : JSON.parse(text)
      } catch {
        body = text
      }
      requests.push({ path, body })
      const tool = callsTool(path, body)
      const turn = n++
      if (req.method === "POST" && path === "/v1/chat/completions") {
        return body?.stream === true
          ? sse(chatChunks(body, tool, turn), false, true)
          : Response.json(chatCompletion(body, tool, turn))
      }
      if (req.method === "POST" && path === "/v1/responses") {
        return body?.stream === true
          ? sse(responseEvents(body, tool, turn), true, false)
          : Response.json(response(body, tool, turn))
      }
      return Response.json({ error: { message: `no route ${req.method} ${path}`, type: "not_found" } }, { status: 404 })
    }
  })
  return { baseUrl: `http://127.0.0.1:${server.port}/v1`, requests, stop: () => server.stop(true) }
}
