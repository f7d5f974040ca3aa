import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Cause, Effect, Exit, Option, ParseResult, Schema } from "effect"
import { z } from "zod"
import { EnforcementCheckRequest } from "#src/domain/Enforcement"
import { EvaluationGateRequest, EvaluationId, RunEvaluationRequest } from "#src/domain/Evaluation"
import { CreateForkRequest } from "#src/domain/Fork"
import type { AccountId } from "#src/domain/Ids"
import { ForkId, TraceId } from "#src/domain/Ids"
import type { SpanWire } from "#src/domain/Span"
import { SearchRequest } from "#src/domain/Search"
import { ListTracesParams } from "#src/domain/Trace"
import type { DomainError } from "#src/domain/DomainError"
import { type ApiError, errorBody, internalError, ValidationFailed } from "#src/api/ApiErrors"
import { toApiError } from "#src/api/ErrorTable"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { GuardrailRepo } from "#layers/enforcement/GuardrailRepo"
import { Evaluations } from "#layers/evaluations/Evaluations"
import { Forks } from "#layers/replay/Forks"
import { Search } from "#layers/search/Search"
import { Traces } from "#layers/traces/Traces"
import { UsageCounters } from "#layers/usage/UsageCounters"

/** The services the product tools act through. */
export type ProductServices = Traces | Forks | Enforcement | GuardrailRepo | Evaluations | Search | UsageCounters

/** Runs an effect on the server's runtime. */
export type Runner = <A, E>(effect: Effect.Effect<A, E, ProductServices>) => Promise<Exit.Exit<A, E>>

/** Who is calling: every tool acts for this account only. */
export interface Caller {
  readonly accountId: AccountId
  readonly credentialId: string
}

const uuid = () => z.string().uuid()
const text = (max: number) => z.string().max(max)
const traceIds = z.array(uuid()).min(1).max(50).refine((ids) => new Set(ids.map((id) => id.toLowerCase())).size === ids.length, {
  message: "trace_ids must be unique"
})

/** A failure as a tool result carrying the API's error body. */
const errorResult = (e: ApiError): CallToolResult => ({
  isError: true,
  content: [{ type: "text", text: JSON.stringify(errorBody(e)) }]
})

/** What a tool's effect may fail with: the services' domain errors, or arguments the API's schema refuses. */
type ToolFailure = DomainError | ParseResult.ParseError

/** A tool's failure as the REST route would answer it: a domain error per the error table. */
export const describeFailure = (e: ToolFailure): CallToolResult =>
  errorResult(ParseResult.isParseError(e) ? new ValidationFailed({ message: e.message.slice(0, 2000) }) : toApiError(e))

const json = (value: unknown): CallToolResult => ({ content: [{ type: "text", text: JSON.stringify(value, null, 2) }] })

/** Runs a tool's effect; typed failures become tool errors with the API's body, defects an internal error. */
const answer = async <A, E extends ToolFailure>(
  run: Runner,
  effect: Effect.Effect<A, E, ProductServices>,
  render: (a: A) => CallToolResult = json
) => {
  const exit = await run(effect)
  if (Exit.isSuccess(exit)) return render(exit.value)
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) return describeFailure(failure.value)
  return errorResult(internalError())
}

const clip = (value: unknown, max: number) => {
  if (value === undefined) return undefined
  const s = typeof value === "string" ? value : JSON.stringify(value)
  return s.length <= max ? s : `${s.slice(0, max)}… (${s.length - max} more chars)`
}

const durationOf = (span: SpanWire) => {
  if (span.duration_ms !== undefined) return span.duration_ms
  if (span.ended_at !== undefined) return Date.parse(span.ended_at) - Date.parse(span.started_at)
  return undefined
}

/** A trace as compact text for a model: a header, then the spans as an indented causal tree. */
export const renderTrace = (
  trace: Record<string, any> & { spans: ReadonlyArray<SpanWire>; causalOrder?: ReadonlyArray<string> },
  options: { readonly maxSpans: number; readonly payloadChars: number }
) => {
  const lines: Array<string> = []
  const head = [
    `Trace ${trace.id}${trace.name ? ` "${trace.name}"` : ""}`,
    `status=${trace.status}`,
    `started=${trace.startedAt}`,
    trace.endedAt ? `ended=${trace.endedAt}` : undefined,
    trace.totalDurationMs !== undefined ? `duration=${trace.totalDurationMs}ms` : undefined,
    `tokens=${trace.totalTokens ?? 0}`,
    `cost=$${trace.totalCost ?? "0"}`,
    `spans=${trace.spanCount ?? trace.spans.length}`,
    trace.sessionId ? `session=${trace.sessionId}` : undefined,
    trace.projectId ? `project=${trace.projectId}` : undefined
  ].filter((x) => x !== undefined)
  lines.push(head.join(" "))
  const input = clip(trace.input, options.payloadChars)
  const output = clip(trace.output, options.payloadChars)
  if (input !== undefined) lines.push(`input: ${input}`)
  if (output !== undefined) lines.push(`output: ${output}`)
  const byId = new Map(trace.spans.map((s) => [s.id as string, s]))
  const depth = new Map<string, number>()
  const depthOf = (id: string, seen = 0): number => {
    const known = depth.get(id)
    if (known !== undefined) return known
    const parent = byId.get(id)?.parent_id
    const d = parent && byId.has(parent) && seen < 64 ? depthOf(parent, seen + 1) + 1 : 0
    depth.set(id, d)
    return d
  }
  const order = trace.causalOrder && trace.causalOrder.length === trace.spans.length
    ? trace.causalOrder.map((id) => byId.get(id)!).filter(Boolean)
    : trace.spans
  if (order.length > 0) lines.push("spans (causal order; children indented under their parent):")
  for (const span of order.slice(0, options.maxSpans)) {
    const pad = "  ".repeat(Math.min(depthOf(span.id), 20))
    const facts = [
      span.model ? `model=${span.model}` : undefined,
      span.input_tokens !== undefined || span.output_tokens !== undefined ? `tokens=${span.input_tokens ?? 0}→${span.output_tokens ?? 0}` : undefined,
      span.cost !== undefined ? `cost=$${span.cost}` : undefined,
      durationOf(span) !== undefined ? `${durationOf(span)}ms` : undefined,
      span.agent_id ? `agent=${span.agent_id}${span.agent_role ? `(${span.agent_role})` : ""}` : undefined,
      span.ended_at === undefined && span.duration_ms === undefined ? "open" : undefined
    ].filter((x) => x !== undefined)
    lines.push(`${pad}- [${span.span_type}] ${span.name} id=${span.id}${facts.length ? ` ${facts.join(" ")}` : ""}`)
    const spanInput = clip(span.input, options.payloadChars)
    const spanOutput = clip(span.output, options.payloadChars)
    if (spanInput !== undefined) lines.push(`${pad}    input: ${spanInput}`)
    if (spanOutput !== undefined) lines.push(`${pad}    output: ${spanOutput}`)
    if (span.error) lines.push(`${pad}    error: ${clip(span.error, options.payloadChars)}`)
  }
  if (order.length > options.maxSpans) lines.push(`… ${order.length - options.maxSpans} more spans (raise max_spans to see them)`)
  return lines.join("\n")
}

const decode = <A, I>(schema: Schema.Schema<A, I>, input: unknown) =>
  Schema.decodeUnknown(schema, { onExcessProperty: "error" })(input)

/** The evaluation a tool names (its path id in the REST route), and the rest of the arguments as that route's body. */
const evaluationCall = <A, I>(schema: Schema.Schema<A, I>, args: { readonly evaluation_id: string }) =>
  Effect.gen(function*() {
    const { evaluation_id, ...body } = args
    return { evaluationId: yield* decode(EvaluationId, evaluation_id), request: yield* decode(schema, body) }
  })

/**
 * Registers the product tools on a (per-request) MCP server. Each tool validates its input twice: the zod
 * schema the client sees (the API's limits), then the API's own effect Schema; then calls the service layer
 * for the caller's account only. Failures come back as tool errors carrying the API's error body.
 */
export const registerProductTools = (server: McpServer, run: Runner, caller: Caller) => {
  const { accountId } = caller

  server.registerTool("list_traces", {
    title: "List traces",
    description: "The account's traces, newest first (GET /api/v1/traces). Page with limit/offset or the returned nextCursor.",
    inputSchema: z.object({
      limit: z.number().int().min(1).max(100).optional(),
      offset: z.number().int().min(0).optional(),
      env: z.literal("sandbox").optional().describe("sandbox lists sandbox traces (fork replays); omitted lists production traces"),
      cursor: text(200).optional()
    }).strict(),
    annotations: { readOnlyHint: true }
  }, (args) =>
    answer(run, Effect.gen(function*() {
      const params = yield* decode(ListTracesParams, {
        ...(args.limit === undefined ? {} : { limit: String(args.limit) }),
        ...(args.offset === undefined ? {} : { offset: String(args.offset) }),
        ...(args.env === undefined ? {} : { env: args.env }),
        ...(args.cursor === undefined ? {} : { cursor: args.cursor })
      })
      return yield* Effect.flatMap(Traces, (traces) => traces.list(accountId, params))
    })))

  server.registerTool("get_trace", {
    title: "Get a trace",
    description: "One trace with its spans as compact text: a header line, then the spans as a causal tree with model, tokens, cost, duration and clipped payloads.",
    inputSchema: z.object({
      trace_id: uuid(),
      max_spans: z.number().int().min(1).max(1000).optional().describe("default 200"),
      payload_chars: z.number().int().min(0).max(100_000).optional().describe("longest input/output shown per span, default 400"),
      format: z.enum(["text", "json"]).optional().describe("text (default) or the API's TraceDetail JSON")
    }).strict(),
    annotations: { readOnlyHint: true }
  }, (args) =>
    answer(
      run,
      Effect.gen(function*() {
        const traceId = yield* decode(TraceId, args.trace_id)
        return yield* Effect.flatMap(Traces, (traces) => traces.get(accountId, traceId))
      }),
      (trace) =>
        args.format === "json"
          ? json(trace)
          : {
            content: [{
              type: "text",
              text: renderTrace(trace as never, { maxSpans: args.max_spans ?? 200, payloadChars: args.payload_chars ?? 400 })
            }]
          }
    ))

  server.registerTool("search_spans", {
    title: "Search spans",
    description: "Semantic similarity search over the account's spans (POST /api/v1/search), best first, with typed filters.",
    inputSchema: z.object({
      query: z.string().min(1).max(10_000),
      filters: z.object({
        project_id: uuid().optional(),
        model: text(100).optional(),
        span_type: z.enum(["llm_call", "tool_call", "tool_result", "reasoning", "action", "error", "fork_point"]).optional(),
        status: z.enum(["running", "completed", "failed"]).optional(),
        date_from: z.string().datetime({ offset: true }).optional(),
        date_to: z.string().datetime({ offset: true }).optional(),
        min_cost: z.number().optional(),
        min_duration_ms: z.number().int().optional()
      }).strict().optional(),
      limit: z.number().int().min(1).max(100).optional().describe("default 20"),
      offset: z.number().int().min(0).max(100_000).optional()
    }).strict(),
    annotations: { readOnlyHint: true }
  }, (args) =>
    answer(run, Effect.gen(function*() {
      const request = yield* decode(SearchRequest, args)
      const result = yield* Effect.flatMap(Search, (search) => search.search(accountId, request))
      yield* Effect.flatMap(UsageCounters, (usage) => usage.increment(accountId, "search_queries")) // as POST /api/v1/search
      return result
    })))

  server.registerTool("create_fork", {
    title: "Create a fork",
    description: "Branches a recorded trace at a span with a replacement input (POST /api/v1/forks). The fork starts pending; replay it with replay_fork.",
    inputSchema: z.object({
      trace_id: uuid(),
      fork_point_span_id: uuid(),
      modified_input: z.unknown().refine((v) => v !== undefined, { message: "modified_input is required" }),
      name: text(500).optional(),
      description: text(10_000).optional(),
      mock_outputs: z.record(z.string(), z.unknown()).optional().describe("tool name or span id → the output to use instead of the recorded one")
    }).strict(),
    annotations: { readOnlyHint: false, destructiveHint: false }
  }, (args) =>
    answer(run, Effect.gen(function*() {
      const request = yield* decode(CreateForkRequest, args)
      return yield* Effect.flatMap(Forks, (forks) => forks.create(accountId, request))
    })))

  server.registerTool("replay_fork", {
    title: "Replay a fork",
    description: "Replays a fork through a connected SDK or the server fallback (POST /api/v1/forks/{forkId}/replay). Uses one unit of the monthly replay allowance and may incur model cost.",
    inputSchema: z.object({ fork_id: uuid() }).strict(),
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true }
  }, (args) =>
    answer(run, Effect.gen(function*() {
      const forkId = yield* decode(ForkId, args.fork_id)
      return yield* Effect.flatMap(Forks, (forks) => forks.replay(accountId, forkId))
    })))

  server.registerTool("run_evaluation", {
    title: "Run an evaluation",
    description: "Queues one judged run of the evaluation per trace (POST /api/v1/evaluations/{id}/run); runs finish in the background.",
    inputSchema: z.object({
      evaluation_id: uuid(),
      trace_ids: traceIds,
      judge_model: text(100).min(1).optional()
    }).strict(),
    annotations: { readOnlyHint: false, openWorldHint: true }
  }, (args) =>
    answer(run, Effect.gen(function*() {
      const { evaluationId, request } = yield* evaluationCall(RunEvaluationRequest, args)
      return yield* Effect.flatMap(Evaluations, (evaluations) => evaluations.run(accountId, evaluationId, request))
    })))

  server.registerTool("gate", {
    title: "CI gate",
    description: "Scores traces with an evaluation against a threshold and answers pass/fail (POST /api/v1/evaluations/{id}/gate).",
    inputSchema: z.object({
      evaluation_id: uuid(),
      trace_ids: traceIds,
      threshold: z.number().min(0).max(1).optional().describe("default 0.7"),
      fail_on_regression: z.boolean().optional().describe("default true"),
      baseline_run_ids: z.array(uuid()).max(1000).optional()
    }).strict(),
    annotations: { readOnlyHint: false, openWorldHint: true }
  }, (args) =>
    answer(run, Effect.gen(function*() {
      const { evaluationId, request } = yield* evaluationCall(EvaluationGateRequest, args)
      return yield* Effect.flatMap(Evaluations, (evaluations) => evaluations.gate(accountId, evaluationId, request))
    })))

  server.registerTool("check_enforcement", {
    title: "Check an action",
    description: "Asks the runtime policies whether a model or tool action may run: allow, block or hold (POST /api/v1/enforcement/check). Fails closed.",
    inputSchema: z.object({
      run_id: z.string().min(1).max(200),
      project_id: uuid().optional(),
      trace_id: uuid().optional(),
      tool_name: text(200).optional(),
      tool_args_hash: text(200).optional(),
      model: text(200).optional(),
      proposed_tokens: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
      proposed_usd: z.number().min(0).max(1e12).optional(),
      step_index: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional()
    }).strict(),
    annotations: { readOnlyHint: false }
  }, (args) =>
    answer(run, Effect.gen(function*() {
      const request = yield* decode(EnforcementCheckRequest, args)
      return yield* Effect.flatMap(Enforcement, (enforcement) => enforcement.check(accountId, request))
    })))

  server.registerTool("list_holds", {
    title: "List holds",
    description: "Actions held for approval by require_approval policies (GET /api/v1/enforcement/holds), newest first.",
    inputSchema: z.object({ status: z.enum(["pending", "approved", "denied", "expired"]).optional() }).strict(),
    annotations: { readOnlyHint: true }
  }, (args) =>
    answer(run, Effect.flatMap(GuardrailRepo, (repo) => repo.holds(accountId, args.status)).pipe(Effect.map((items) => ({ items })))))

  server.registerTool("approve_hold", {
    title: "Approve a hold",
    description: "Approves a pending hold so the held action is allowed (POST /api/v1/enforcement/holds/{holdId}/approve). The approving credential is recorded.",
    inputSchema: z.object({ hold_id: uuid(), reason: text(2000).optional() }).strict(),
    annotations: { readOnlyHint: false, destructiveHint: false }
  }, (args) =>
    answer(run, Effect.gen(function*() {
      const holdId = yield* decode(Schema.UUID, args.hold_id)
      return yield* Effect.flatMap(GuardrailRepo, (repo) =>
        repo.decideHold(accountId, holdId, "approved", caller.credentialId, args.reason ?? null))
    })))
}
