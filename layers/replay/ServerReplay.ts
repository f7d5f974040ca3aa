import { Effect, Either, Schema } from "effect"
import type { Fork } from "#src/domain/Fork"
import { messagesAfterForkPoint, messagesAtForkPoint, recordedRequest, splitAtForkPoint } from "#src/domain/ReplayPlan"
import type { SpanWire } from "#src/domain/Span"
import { CreateTraceRequest, MAX_SPANS_PER_REQUEST, type TraceDetailWire } from "#src/domain/Trace"
import { type ChatMessage, type ChatRequest, LlmClient } from "../llm/LlmClient.ts"
import { ModelPrices } from "../llm/Prices.ts"
import { ReplayFailed } from "#src/domain/Errors"

/** The result of re-running a fork on the server: the result trace to store and the fidelity report. */

/** A re-executed call's times: it starts when the recorded call started and lasts `tookMs`. */
const onRecordedTimeline = (recordedStart: unknown, ranAt: Date, tookMs: number) => {
  const parsed = typeof recordedStart === "string" ? Date.parse(recordedStart) : Number.NaN
  const start = Number.isFinite(parsed) ? parsed : ranAt.getTime()
  return { started_at: new Date(start).toISOString(), ended_at: new Date(start + tookMs).toISOString(), duration_ms: tookMs }
}
export interface ServerReplayOutcome {
  readonly trace: CreateTraceRequest
  readonly byteReplayed: number
  readonly faithfulReexec: number
  readonly caveats: ReadonlyArray<string>
  /** Whether any model call succeeded (a replay that did none gives its allowance unit back). */
  readonly modelWork: boolean
}

/**
 * The Chat Completions request that re-executes a recorded llm_call: its messages plus the tools and
 * parameters recorded with its input. Adds to `sent` the parameters it carries and to `unsent` those it
 * cannot (a field with no Chat Completions equivalent, or a value of the wrong kind).
 */
export const replayRequest = (
  model: string,
  messages: ReadonlyArray<ChatMessage>,
  recordedInput: unknown,
  sent: Set<string>,
  unsent: Set<string>
): ChatRequest => {
  const recorded = recordedRequest(recordedInput)
  const request: Record<string, unknown> = { model, messages }
  for (const [name, value] of Object.entries(recorded.parameters)) {
    const numeric = name === "temperature" || name === "max_tokens"
    if (numeric && typeof value !== "number") {
      unsent.add(`${name} (recorded value is not a number)`)
      continue
    }
    request[name] = value
    sent.add(name)
  }
  for (const name of recorded.unreproducible) unsent.add(`${name} (no Chat Completions equivalent)`)
  return request as unknown as ChatRequest
}

const withoutModel = ({ model: _model, ...rest }: ChatRequest) => rest

const toolName = (span: SpanWire) => {
  const tool = (span.metadata as { gen_ai?: { tool?: { name?: unknown } } } | undefined)?.gen_ai?.tool?.name
  return typeof tool === "string" ? tool : span.name
}

/**
 * Re-runs a recorded trace from a fork point: spans before it are copied as recorded; a `fork_point` span
 * marks the branch (the fork point's subtree hangs under it); from there llm_call spans are executed again
 * through the model provider with the modified input threaded in; tool spans take `mock_outputs` (by tool
 * name or span id) or their recorded output. Everything that was not faithful is listed in plain words.
 */
export const replayOnServer = Effect.fn("ServerReplay.run")(function*(input: {
  readonly source: TraceDetailWire
  readonly fork: Fork
  readonly executionId: string
  readonly resultTraceId: string
}) {
  const llm = yield* LlmClient
  const prices = yield* ModelPrices
  const { source, fork } = input
  const split = splitAtForkPoint(source.spans, fork.forkPointSpanId)
  if (split === undefined) {
    return yield* new ReplayFailed({ reason: `span ${fork.forkPointSpanId} is no longer in trace ${source.id}`, modelWork: false })
  }
  // The result is written through the Traces API's own validation, 1000 spans at most (the fork point adds one).
  if (split.before.length + split.after.length + 1 > MAX_SPANS_PER_REQUEST) {
    return yield* new ReplayFailed({
      reason: `server replay supports traces of up to ${MAX_SPANS_PER_REQUEST - 1} spans; this one has ${source.spans.length}`,
      modelWork: false
    })
  }
  const caveats = new Set<string>()
  const mocks = (fork.mockOutputs ?? {}) as Record<string, unknown>
  const forkPoint = split.after[0]!
  const forkSpanId = crypto.randomUUID()
  let faithful = 0
  let modelWork = false
  let firstCall = true
  let lastOutput: unknown = undefined
  // The fidelity report names the request parameters sent again and those that could not be.
  const sentParameters = new Set<string>()
  const unsentParameters = new Set<string>()
  const withoutParameters: Array<string> = []

  const replayed: Array<Record<string, unknown>> = []
  for (const span of split.after) {
    const copy: Record<string, unknown> = { ...span, parent_id: span.id === forkPoint.id ? forkSpanId : span.parent_id }
    if (span.span_type === "llm_call") {
      if (!llm.configured) {
        caveats.add("no model provider configured: llm_call outputs reused from the recording")
        firstCall = false
      } else {
        const model = span.model ?? llm.defaultModel
        if (model === undefined) {
          caveats.add(`llm_call '${span.name}' has no recorded model and no default model is configured: output reused`)
        } else {
          const messages = (firstCall ? messagesAtForkPoint(span.input, fork.modifiedInput) : messagesAfterForkPoint(span.input, fork.modifiedInput)) as ReadonlyArray<ChatMessage>
          const started = new Date()
          const request = replayRequest(model, messages, span.input, sentParameters, unsentParameters)
          if (request.tools === undefined && Object.keys(request).length === 2) withoutParameters.push(span.name)
          const answer = yield* llm.chat(request).pipe(Effect.either)
          if (Either.isLeft(answer)) {
            return yield* new ReplayFailed({ reason: `model call for '${span.name}' failed: ${answer.left.message}`, modelWork })
          }
          const response = answer.right
          modelWork = true
          faithful++
          if (span.model === undefined) caveats.add(`llm_call '${span.name}' had no recorded model; replayed with '${model}'`)
          else if (response.model && response.model !== span.model) caveats.add(`model '${span.model}' replaced by '${response.model}'`)
          const cost = prices.costOf(response.model || model, response.usage.inputTokens, response.usage.outputTokens)
          if (cost === undefined) caveats.add(`no price known for model '${response.model || model}': its cost is not counted`)
          const output = { role: "assistant", content: response.message.content, ...(response.message.tool_calls ? { tool_calls: response.message.tool_calls } : {}) }
          Object.assign(copy, {
            model: response.model || model,
            // The request as sent: messages plus the tools and parameters, so the branch can itself be replayed.
            input: Object.keys(request).length > 2 ? withoutModel(request) : messages,
            output,
            input_tokens: response.usage.inputTokens,
            output_tokens: response.usage.outputTokens,
            // On the recording's timeline (the copied spans keep their recorded times), lasting as long as the new
            // call did: the branch's waterfall and its duration compare with the original's instead of spanning
            // from the recording to now. When the call really ran is kept beside it.
            ...onRecordedTimeline(span.started_at, started, Date.now() - started.getTime()),
            metadata: {
              ...(span.metadata ?? {}),
              replay: { reexecuted: true, executed_at: started.toISOString(), recorded_output: span.output ?? null }
            }
          })
          delete copy.cost
          if (cost !== undefined) copy.cost = cost
          lastOutput = output
        }
        firstCall = false
      }
    } else if (span.span_type === "tool_call" || span.span_type === "tool_result") {
      const name = toolName(span)
      if (Object.hasOwn(mocks, span.id) || Object.hasOwn(mocks, name)) {
        copy.output = Object.hasOwn(mocks, span.id) ? mocks[span.id] : mocks[name]
        copy.metadata = { ...(span.metadata ?? {}), replay: { mocked: true, recorded_output: span.output ?? null } }
      } else {
        caveats.add(`tool '${name}' output reused from the recording; side effects were not re-run`)
      }
    } else if (span.span_type !== "fork_point") {
      caveats.add(`${span.span_type} spans after the fork point were copied from the recording`)
    }
    replayed.push(copy)
  }

  if (sentParameters.size > 0) caveats.add(`request parameters sent again to the model: ${[...sentParameters].join(", ")}`)
  if (unsentParameters.size > 0) caveats.add(`request parameters recorded but not reproduced: ${[...unsentParameters].join(", ")}`)
  if (withoutParameters.length > 0) {
    caveats.add(`no tools or request parameters were recorded for llm_call '${withoutParameters[0]}'${withoutParameters.length > 1 ? ` and ${withoutParameters.length - 1} more` : ""}: sent with its messages only, no tools offered`)
  }

  const forkPointSpan = {
    id: forkSpanId,
    parent_id: forkPoint.parent_id,
    span_type: "fork_point",
    name: `fork: ${forkPoint.name}`.slice(0, 500),
    input: fork.modifiedInput,
    started_at: forkPoint.started_at,
    ended_at: forkPoint.started_at,
    metadata: { fork_id: fork.id, execution_id: input.executionId, source_trace_id: source.id, source_span_id: forkPoint.id }
  }
  const request = {
    id: input.resultTraceId,
    started_at: source.startedAt,
    name: `${source.name ?? "trace"} (fork ${fork.name ?? fork.id.slice(0, 8)})`.slice(0, 500),
    input: fork.modifiedInput,
    ...(lastOutput !== undefined ? { output: lastOutput } : source.output !== undefined ? { output: source.output } : {}),
    status: "completed",
    ...(source.sessionId ? { session_id: source.sessionId } : {}),
    ...(source.projectId ? { project_id: source.projectId } : {}),
    metadata: {
      environment: "sandbox",
      fork_id: fork.id,
      execution_id: input.executionId,
      source_trace_id: source.id,
      fork_point_span_id: forkPoint.id,
      replay_mode: "server"
    },
    spans: [...split.before, forkPointSpan, ...replayed]
  }
  const trace = yield* Schema.decodeUnknown(CreateTraceRequest)(request).pipe(
    Effect.mapError((e) => new ReplayFailed({ reason: `the replayed trace is not valid: ${e.message.slice(0, 300)}`, modelWork }))
  )
  return {
    trace,
    byteReplayed: split.before.length,
    faithfulReexec: faithful,
    caveats: [...caveats],
    modelWork
  } satisfies ServerReplayOutcome
})
