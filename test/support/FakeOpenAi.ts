/** A request the fake received: lower-cased headers, the JSON body (or the raw text when it is not JSON). */
export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: any
  /** `performance.now()` when the request arrived, to measure the waits between retries. */
  readonly receivedAt: number
}

/**
 * How the fake answers one call. Unset fields take the defaults: `delayMs` waits before answering; `malformed`
 * answers 200 with that raw body; `status` ≥ 400 answers an OpenAI-style error (with `retryAfter` as the
 * Retry-After header); otherwise a completion with `content` (default `"echo: " + last user message`), `toolCalls`,
 * `finishReason`, `model` (default: the requested one) and `usage` (default prompt 10 / completion 5; `null` omits it).
 */
export interface FakeReply {
  readonly delayMs?: number
  readonly malformed?: string
  readonly status?: number
  readonly retryAfter?: string
  readonly errorMessage?: string
  readonly content?: string | null
  readonly toolCalls?: ReadonlyArray<unknown>
  readonly finishReason?: string
  readonly model?: string
  readonly usage?: { readonly prompt_tokens: number; readonly completion_tokens: number } | null
}

/** Decides the answer to the n-th chat completion call (from 0); a `Response` is sent as is, `undefined` = default. */
export type FakeScript = (
  request: RecordedRequest,
  callIndex: number
) => FakeReply | Response | undefined | Promise<FakeReply | Response | undefined>

export interface FakeOpenAi {
  /** `http://127.0.0.1:<port>/v1`, the value for TAPEDECK_LLM_BASE_URL. */
  readonly baseUrl: string
  /** Every request received, in arrival order, including those to unknown paths. */
  readonly requests: ReadonlyArray<RecordedRequest>
  readonly stop: () => Promise<void>
}

const lastUserMessage = (body: any): string => {
  const messages: ReadonlyArray<any> = Array.isArray(body?.messages) ? body.messages : []
  const last = messages.findLast((m) => m?.role === "user")
  return typeof last?.content === "string" ? last.content : ""
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } })

const answer = (request: RecordedRequest, reply: FakeReply, callIndex: number): Response => {
  if (reply.malformed !== undefined) {
    return new Response(reply.malformed, { status: 200, headers: { "content-type": "application/json" } })
  }
  if (reply.status !== undefined && reply.status >= 400) {
    const error = { message: reply.errorMessage ?? `fake error ${reply.status}`, type: "fake_error", code: null }
    return json(reply.status, { error }, reply.retryAfter === undefined ? {} : { "retry-after": reply.retryAfter })
  }
  const toolCalls = reply.toolCalls
  const usage = reply.usage === undefined ? { prompt_tokens: 10, completion_tokens: 5 } : reply.usage
  return json(reply.status ?? 200, {
    id: `chatcmpl-fake-${callIndex}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: reply.model ?? request.body?.model ?? "fake-model",
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content:
            reply.content === undefined ? (toolCalls ? null : `echo: ${lastUserMessage(request.body)}`) : reply.content,
          ...(toolCalls === undefined ? {} : { tool_calls: toolCalls })
        },
        finish_reason: reply.finishReason ?? (toolCalls ? "tool_calls" : "stop")
      }
    ],
    ...(usage === null ? {} : { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } })
  })
}

/** An OpenAI-compatible server on 127.0.0.1 (ephemeral port) serving POST /v1/chat/completions from a script. */
export const startFakeOpenAi = (script: FakeScript = () => undefined): FakeOpenAi => {
  const requests: Array<RecordedRequest> = []
  let calls = 0
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const receivedAt = performance.now()
      const text = await req.text()
      let body: unknown = text
      try {
        body = text === "" ? undefined : JSON.parse(text)
      } catch {
        // Kept as text: tests may assert what a client sent that was not JSON.
      }
      const recorded: RecordedRequest = {
        method: req.method,
        path: new URL(req.url).pathname,
        headers: Object.fromEntries(req.headers),
        body,
        receivedAt
      }
      requests.push(recorded)
      if (req.method !== "POST" || recorded.path !== "/v1/chat/completions") {
        return json(404, { error: { message: `no route ${req.method} ${recorded.path}`, type: "not_found" } })
      }
      const callIndex = calls++
      const reply = (await script(recorded, callIndex)) ?? {}
      if (reply instanceof Response) return reply
      if (reply.delayMs !== undefined) await Bun.sleep(reply.delayMs)
      return answer(recorded, reply, callIndex)
    }
  })
  return {
    baseUrl: `http://127.0.0.1:${server.port}/v1`,
    requests,
    // Closes open connections too, so a reply still sleeping cannot keep the test process alive.
    stop: () => server.stop(true)
  }
}
