/**
 * Wrappers that record a span around each call of an agent's function: tool_call spans for tools,
 * llm_call spans for model calls. The wrapped function's result, its thrown error, its `this` and whether
 * it is sync or async are all kept as they are; recording can never make the call fail.
 */
import type { Run, SpanEndOptions, SpanHandle, SpanOptions, SpanType } from "./Run.ts"

/** Where the wrapper's spans go: a run (root spans), a span (its children), or a function picking one per call. */
export type SpanTarget = Run | SpanHandle | (() => Run | SpanHandle | undefined | null)

export interface WrapOptions<A extends unknown[], R> {
  /** Span name (default: the tool name, or the model). */
  readonly name?: string | undefined
  readonly agentId?: string | undefined
  readonly parentAgentId?: string | undefined
  readonly agentRole?: string | undefined
  readonly metadata?: Record<string, unknown> | undefined
  /** What to record as the span's input. Default: the single argument, or the argument list when there are several. */
  readonly mapInput?: ((...args: A) => unknown) | undefined
  /** What to record as the span's output. Default: the result. */
  readonly mapOutput?: ((result: Awaited<R>) => unknown) | undefined
}

export interface Usage {
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
  readonly cost?: number | undefined
}

export interface ModelOptions<A extends unknown[], R> extends WrapOptions<A, R> {
  /** Usage of a result. Default: `extractUsage`. */
  readonly usage?: ((result: Awaited<R>) => Usage | undefined) | undefined
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

/** A token count: a number, or an object with a numeric `total` (AI SDK 6 usage). */
const countOf = (value: unknown): number | undefined => {
  if (typeof value === "number" && Number.isFinite(value)) return value
  if (isObject(value) && typeof value.total === "number") return value.total
  return undefined
}

const firstCount = (source: Record<string, unknown>, keys: ReadonlyArray<string>): number | undefined => {
  for (const key of keys) {
    const n = countOf(source[key])
    if (n !== undefined) return n
  }
  return undefined
}

const INPUT_KEYS = [
  "inputTokens",
  "input_tokens",
  "promptTokens",
  "prompt_tokens",
  "promptTokenCount",
  "prompt_eval_count"
]
const OUTPUT_KEYS = [
  "outputTokens",
  "output_tokens",
  "completionTokens",
  "completion_tokens",
  "candidatesTokenCount",
  "eval_count"
]
const COST_KEYS = ["cost", "total_cost", "totalCost", "cost_usd"]

/**
 * Token usage and cost found in a model result, whatever the client library: `usage` with
 * inputTokens/outputTokens (Vercel AI SDK, Bedrock), input_tokens/output_tokens (Anthropic, OpenAI
 * Responses), prompt_tokens/completion_tokens (OpenAI Chat Completions), promptTokens/completionTokens (AI
 * SDK 4); `usageMetadata` (Gemini); top-level prompt_eval_count/eval_count (Ollama) or inputTokens/
 * outputTokens; `cost` on the result or in its usage.
 */
export const extractUsage = (result: unknown): Usage => {
  if (!isObject(result)) return {}
  const sources = [
    result.usage,
    result.usageMetadata,
    isObject(result.response) ? result.response.usage : undefined,
    result
  ].filter(isObject)
  let inputTokens: number | undefined
  let outputTokens: number | undefined
  let cost: number | undefined
  for (const source of sources) {
    inputTokens ??= firstCount(source, INPUT_KEYS)
    outputTokens ??= firstCount(source, OUTPUT_KEYS)
    cost ??= firstCount(source, COST_KEYS)
  }
  return {
    ...(inputTokens === undefined ? {} : { inputTokens }),
    ...(outputTokens === undefined ? {} : { outputTokens }),
    ...(cost === undefined ? {} : { cost })
  }
}

type Starter = { startSpan(options: Omit<SpanOptions, "parent">): SpanHandle }

const resolveTarget = (target: SpanTarget): Starter | undefined => {
  const resolved = typeof target === "function" ? target() : target
  return resolved && typeof (resolved as Partial<Starter>).startSpan === "function" ? (resolved as Starter) : undefined
}

const safely = <T>(f: () => T): T | undefined => {
  try {
    return f()
  } catch {
    return undefined
  }
}

const inputOf = <A extends unknown[]>(args: A, mapInput: ((...args: A) => unknown) | undefined): unknown =>
  mapInput ? safely(() => mapInput(...args)) : args.length === 1 ? args[0] : args

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === "object" || typeof value === "function") &&
  value !== null &&
  typeof (value as { then?: unknown }).then === "function"

/**
 * Calls `fn` inside a span. The span is ended when the call returns, or when its promise settles (with
 * the error when it throws or rejects); the caller gets the same value or the same error.
 */
const traced = <A extends unknown[], R>(
  target: SpanTarget,
  fn: (...args: A) => R,
  start: (args: A) => Omit<SpanOptions, "parent">,
  end: (result: Awaited<R>) => SpanEndOptions
) =>
  function (this: unknown, ...args: A): R {
    const span = safely(() => resolveTarget(target)?.startSpan(start(args)))
    const finish = (options: () => SpanEndOptions) => {
      if (!span) return
      const opts = safely(options) ?? {}
      safely(() => span.end(opts))
    }
    let result: R
    try {
      result = fn.apply(this, args)
    } catch (error) {
      finish(() => ({ error }))
      throw error
    }
    if (!isThenable(result)) {
      finish(() => end(result as Awaited<R>))
      return result
    }
    // A native promise (or subclass) is chained as is; another thenable is adopted once, since some
    // (query builders) run again on every then().
    const promise = result instanceof Promise ? result : Promise.resolve(result)
    return promise.then(
      (value: Awaited<R>) => {
        finish(() => end(value))
        return value
      },
      (error: unknown) => {
        finish(() => ({ error }))
        throw error
      }
    ) as R
  }

const agentFields = (options: WrapOptions<never, never>) => ({
  agentId: options.agentId,
  parentAgentId: options.parentAgentId,
  agentRole: options.agentRole,
  metadata: options.metadata
})

/**
 * Wraps a tool: each call records a `tool_call` span named `name` (input: the arguments, output: the
 * result, error: what it threw, rethrown unchanged).
 */
export const wrapTool = <A extends unknown[], R>(
  target: SpanTarget,
  name: string,
  fn: (...args: A) => R,
  options: WrapOptions<A, R> = {}
): ((...args: A) => R) =>
  traced(
    target,
    fn,
    (args) => ({
      type: "tool_call" satisfies SpanType,
      name: options.name ?? name,
      input: inputOf(args, options.mapInput),
      ...agentFields(options as WrapOptions<never, never>)
    }),
    (result) => ({ output: options.mapOutput ? safely(() => options.mapOutput!(result)) : result })
  )

/**
 * Wraps a model call: each call records an `llm_call` span with `model`, input (the arguments), output
 * (the result) and the token usage and cost found in the result (see `extractUsage`; override with
 * `options.usage`). Any function returning any value, or a promise of one, can be wrapped.
 */
export const wrapModel = <A extends unknown[], R>(
  target: SpanTarget,
  model: string,
  fn: (...args: A) => R,
  options: ModelOptions<A, R> = {}
): ((...args: A) => R) =>
  traced(
    target,
    fn,
    (args) => ({
      type: "llm_call" satisfies SpanType,
      name: options.name ?? model,
      model,
      input: inputOf(args, options.mapInput),
      ...agentFields(options as WrapOptions<never, never>)
    }),
    (result) => {
      const usage = (options.usage ? safely(() => options.usage!(result)) : extractUsage(result)) ?? {}
      return {
        output: options.mapOutput ? safely(() => options.mapOutput!(result)) : result,
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        cost: usage.cost
      }
    }
  )
