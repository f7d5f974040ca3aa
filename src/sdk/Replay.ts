import type { Tapedeck } from "./Client.ts"
import type { Run } from "./Run.ts"
import { wrapTool } from "./Wrap.ts"

/** What a replayed agent is given: the fork, the recording it branches from, and a run to record into. */
export interface ReplayContext {
  readonly executionId: string
  readonly agent: string
  readonly fork: unknown
  /** The recorded trace (TraceDetail: spans in order, snake_case). */
  readonly sourceTrace: {
    readonly id: string
    readonly spans: ReadonlyArray<{ readonly id: string; readonly [key: string]: unknown }>
  }
  readonly forkPointSpanId: string
  /** The input to run with instead of the recorded one. */
  readonly modifiedInput: unknown
  readonly mockOutputs: Readonly<Record<string, unknown>>
  /**
   * Per recorded llm_call span id: the tools and request parameters (`tools`, `tool_choice`, `temperature`,
   * `max_tokens`, …, Chat Completions names) it was made with, to pass to the model client again so the
   * replayed model can call the same tools.
   */
  readonly modelRequests: Readonly<Record<string, Readonly<Record<string, unknown>>>>
  /** Record the replayed run here: its id is the result trace id the server allocated. */
  readonly run: Run
  /**
   * The tool, recorded as a tool_call span, that answers with the mocked output when the fork mocks it
   * (by tool name) and runs for real otherwise.
   */
  readonly tool: <A extends ReadonlyArray<unknown>, R>(
    name: string,
    fn: (...args: A) => R | Promise<R>
  ) => (...args: A) => Promise<R>
}

/** An agent the SDK can re-run from a fork point; it resolves to the run's output. */
export type ReplayAgent = (context: ReplayContext) => Promise<unknown>

export interface ReplayOptions {
  readonly agents: Readonly<Record<string, ReplayAgent>>
  /** Tapedeck's base URL and key; by default those of the client. */
  readonly baseUrl?: string
  readonly apiKey?: string
  /** Delay before reconnecting after the socket closed (doubles up to 30 s). */
  readonly reconnectDelayMs?: number
  readonly onError?: (error: Error) => void
  /**
   * The WebSocket class to connect with; by default the global one (Node 22+, Bun, Deno; Node 20 and 21 with
   * `--experimental-websocket`). On Node 18 pass one that takes `{ headers }`, such as `WebSocket` from the
   * `ws` package: the key travels in the `x-service-key` header, never in the URL.
   */
  readonly webSocket?: WebSocketClass
}

/** What the replay connection uses of a WebSocket (structural, so no DOM or Node typings are needed). */
export interface ReplaySocket {
  readonly readyState: number
  send(data: string): void
  close(): void
  addEventListener(type: string, listener: (event: { readonly data?: unknown }) => void): void
}

/** A WebSocket constructor that takes request headers as its second argument (undici, Bun, Deno, `ws`). */
export type WebSocketClass = new (url: string, options: { headers: Record<string, string> }) => ReplaySocket

export interface ReplayConnection {
  /** Resolves once the server acknowledged the registration (the first time). */
  readonly ready: Promise<void>
  /** Executions running now. */
  readonly active: () => ReadonlyArray<string>
  readonly close: () => void
}

interface Command {
  readonly type: "replay"
  readonly execution_id: string
  readonly agent: string
  readonly fork: unknown
  readonly source_trace: ReplayContext["sourceTrace"]
  readonly fork_point_span_id: string
  readonly modified_input: unknown
  readonly mock_outputs: Record<string, unknown>
  readonly model_requests?: Record<string, Record<string, unknown>>
  readonly result_trace_id: string
}

/**
 * Serves SDK-mode replays: connects to GET /ws/v1/replay, registers `agents`, and runs one whenever the
 * server asks, recording the result into the trace id the server allocated (a sandbox trace), with the
 * fork's mocked tool outputs applied by `context.tool`. Reconnects by itself and tells the server which
 * executions it is still running, so they are not failed. Never throws into the caller.
 */
export const connectReplay = (
  tapedeck: Tapedeck,
  options: ReplayOptions & { readonly baseUrl: string; readonly apiKey: string }
): ReplayConnection => {
  const report = (error: unknown) => options.onError?.(error instanceof Error ? error : new Error(String(error)))
  const active = new Map<string, Promise<void>>()
  const url = `${options.baseUrl.replace(/^http/, "ws").replace(/\/$/, "")}/ws/v1/replay`
  let socket: ReplaySocket | undefined
  let closed = false
  let delay = options.reconnectDelayMs ?? 500
  let markReady!: () => void
  const ready = new Promise<void>((resolve) => (markReady = resolve))

  const send = (message: unknown) => {
    try {
      if (socket?.readyState === 1) socket.send(JSON.stringify(message))
    } catch (e) {
      report(e)
    }
  }

  const run = async (command: Command) => {
    const agent = options.agents[command.agent]
    const recording = tapedeck.startRun({
      id: command.result_trace_id,
      name: `${command.agent} (replay)`,
      input: command.modified_input,
      metadata: {
        environment: "sandbox",
        execution_id: command.execution_id,
        source_trace_id: command.source_trace.id,
        replay_mode: "sdk"
      }
    })
    const mocked = new Set<string>()
    const context: ReplayContext = {
      executionId: command.execution_id,
      agent: command.agent,
      fork: command.fork,
      sourceTrace: command.source_trace,
      forkPointSpanId: command.fork_point_span_id,
      modifiedInput: command.modified_input,
      mockOutputs: command.mock_outputs,
      modelRequests: command.model_requests ?? {},
      run: recording,
      tool: (name, fn) => {
        const real = wrapTool(recording, name, fn as never) as (...args: Array<unknown>) => Promise<never>
        const fake = wrapTool(recording, name, (() => command.mock_outputs[name]) as never) as (
          ...args: Array<unknown>
        ) => Promise<never>
        return ((...args: Array<unknown>) => {
          if (!Object.hasOwn(command.mock_outputs, name)) return real(...args)
          mocked.add(name)
          return fake(...args)
        }) as never
      }
    }
    let status: "completed" | "failed" = "completed"
    let error: string | undefined
    try {
      if (agent === undefined) throw new Error(`no agent named '${command.agent}' is registered`)
      const output = await agent(context)
      await recording.finish({ output })
    } catch (e) {
      status = "failed"
      error = e instanceof Error ? e.message : String(e)
      await recording.finish({ error })
    }
    await tapedeck.flush()
    send({
      type: "replay_finished",
      execution_id: command.execution_id,
      status,
      ...(error === undefined ? {} : { error: error.slice(0, 4000) }),
      fidelity_caveats: [...mocked].map((name) => `tool '${name}' output mocked`)
    })
  }

  const connect = () => {
    if (closed) return
    const Socket = options.webSocket ?? (globalThis as unknown as { WebSocket?: WebSocketClass }).WebSocket
    if (Socket === undefined) {
      // Not retried: no WebSocket will appear later in this process.
      report(new Error("no WebSocket in this runtime: pass `webSocket` (e.g. from the ws package) or use Node 22+"))
      return
    }
    try {
      socket = new Socket(url, { headers: { "x-service-key": options.apiKey } })
    } catch (e) {
      report(e)
      setTimeout(connect, delay)
      return
    }
    socket.addEventListener("open", () => {
      delay = options.reconnectDelayMs ?? 500
      send({ type: "register", agents: Object.keys(options.agents) })
      if (active.size > 0) send({ type: "resume", execution_ids: [...active.keys()] })
    })
    socket.addEventListener("message", (event) => {
      let message: { readonly type?: string; readonly execution_id?: string }
      try {
        message = JSON.parse(String(event.data))
      } catch {
        return
      }
      if (message.type === "registered") markReady()
      if (message.type === "replay" && message.execution_id && !active.has(message.execution_id)) {
        const command = message as unknown as Command
        const job = run(command)
          .catch(report)
          .finally(() => active.delete(command.execution_id))
        active.set(command.execution_id, job)
      }
    })
    socket.addEventListener("close", () => {
      if (closed) return
      setTimeout(connect, delay)
      delay = Math.min(delay * 2, 30_000)
    })
    socket.addEventListener("error", () => report(new Error("replay socket error")))
  }
  connect()

  return {
    ready,
    active: () => [...active.keys()],
    close: () => {
      closed = true
      socket?.close()
    }
  }
}
