import { afterEach, describe, expect, test } from "bun:test"
import { Cause, ConfigProvider, Effect, Exit, Layer, Tracer } from "effect"
import { type ChatRequest, LlmClient } from "#layers/llm/LlmClient"
import { LlmClientLive, parseRetryAfter } from "#layers/llm/OpenAiCompatibleLlm"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { costOf, DEFAULT_PRICES, estimatedCost, ModelPrices, priceOf, withEstimatedCost } from "#layers/llm/Prices"
import { type FakeOpenAi, type FakeScript, startFakeOpenAi } from "../support/FakeOpenAi.ts"
import type { LlmUnavailable } from "#src/domain/Errors"

const API_KEY = "sk-test-0123456789-very-secret"

const configured = (env: Record<string, string>) => Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const fakes: Array<FakeOpenAi> = []
afterEach(async () => {
  await Promise.all(fakes.splice(0).map((fake) => fake.stop()))
})

/** A fake provider and the env pointing the client at it: quick retries, key set. */
const provider = (script?: FakeScript, env: Record<string, string> = {}) => {
  const fake = startFakeOpenAi(script)
  fakes.push(fake)
  return {
    fake,
    env: {
      TAPEDECK_LLM_BASE_URL: fake.baseUrl,
      TAPEDECK_LLM_API_KEY: API_KEY,
      TAPEDECK_LLM_RETRY_BASE_MS: "1",
      ...env
    }
  }
}

const chat = (env: Record<string, string>, request: ChatRequest) =>
  Effect.runPromise(
    Effect.flatMap(LlmClient, (llm) => llm.chat(request)).pipe(Effect.provide(LlmClientLive.pipe(Layer.provide(configured(env)))))
  )

const chatError = (env: Record<string, string>, request: ChatRequest): Promise<LlmUnavailable> =>
  Effect.runPromise(
    Effect.flatMap(LlmClient, (llm) => Effect.flip(llm.chat(request))).pipe(
      Effect.provide(LlmClientLive.pipe(Layer.provide(configured(env))))
    )
  )

const hello: ChatRequest = { model: "gpt-4o-mini", messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hello" }] }

/** Every way an error may be shown: message, toString, JSON and a pretty cause. */
const renderings = (error: LlmUnavailable) => [error.message, String(error), JSON.stringify(error), Cause.pretty(Cause.fail(error))]

describe("LlmClientLive against an OpenAI-compatible server", () => {
  test("answers with the first choice, usage and model", async () => {
    const { fake, env } = provider()
    const response = await chat(env, { ...hello, temperature: 0.2, max_tokens: 64 })
    expect(response).toEqual({
      model: "gpt-4o-mini",
      message: { role: "assistant", content: "echo: hello" },
      usage: { inputTokens: 10, outputTokens: 5 },
      finishReason: "stop"
    })
    expect(fake.requests).toHaveLength(1)
    expect(fake.requests[0]!.path).toBe("/v1/chat/completions")
    expect(fake.requests[0]!.body).toEqual({ ...hello, temperature: 0.2, max_tokens: 64 })
  })

  test("each call is an LlmClient.chat span carrying the model and usage", async () => {
    const { env } = provider()
    const spans: Array<Tracer.Span> = []
    await Effect.runPromise(Effect.gen(function*() {
      const base = yield* Effect.tracer
      const recording = Tracer.make({
        span: (...args) => {
          const span = base.span(...args)
          spans.push(span)
          return span
        },
        context: base.context
      })
      const llm = yield* LlmClient
      yield* llm.chat(hello).pipe(Effect.withTracer(recording))
    }).pipe(Effect.provide(LlmClientLive.pipe(Layer.provide(configured(env))))))
    const span = spans.find((s) => s.name === "LlmClient.chat")
    expect(span?.attributes.get("gen_ai.request.model")).toBe("gpt-4o-mini")
    expect(span?.attributes.get("gen_ai.usage.input_tokens")).toBe(10)
    expect(span?.attributes.get("llm.attempts")).toBe(1)
  })

  test("sends the API key as a bearer token, and no Authorization without a key", async () => {
    const { fake, env } = provider()
    await chat(env, hello)
    expect(fake.requests[0]!.headers.authorization).toBe(`Bearer ${API_KEY}`)
    expect(fake.requests[0]!.headers["content-type"]).toContain("application/json")

    const { TAPEDECK_LLM_API_KEY: _, ...withoutKey } = env
    await chat(withoutKey, hello)
    expect(fake.requests[1]!.headers.authorization).toBeUndefined()
  })

  test("passes tool calls through, falls back to the default model and counts missing usage as 0", async () => {
    const toolCalls = [{ id: "call_1", type: "function", function: { name: "lookup", arguments: "{\"q\":\"x\"}" } }]
    const { fake, env } = provider(() => ({ toolCalls, usage: null }), { TAPEDECK_LLM_MODEL: "gpt-4.1" })
    const response = await chat(env, {
      model: "",
      messages: [{ role: "user", content: "find x" }],
      tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }]
    })
    expect(fake.requests[0]!.body.model).toBe("gpt-4.1")
    expect(fake.requests[0]!.body.tools).toHaveLength(1)
    expect(response.model).toBe("gpt-4.1")
    expect(response.message).toEqual({ role: "assistant", content: null, tool_calls: toolCalls })
    expect(response.finishReason).toBe("tool_calls")
    expect(response.usage).toEqual({ inputTokens: 0, outputTokens: 0 })
  })

  test("retries a 429 after the Retry-After delay, then succeeds", async () => {
    const { fake, env } = provider((_, n) => (n === 0 ? { status: 429, retryAfter: "1" } : undefined))
    const response = await chat(env, hello)
    expect(response.message.content).toBe("echo: hello")
    expect(fake.requests).toHaveLength(2)
    // The backoff base is 1 ms, so only Retry-After explains a one-second wait.
    expect(fake.requests[1]!.receivedAt - fake.requests[0]!.receivedAt).toBeGreaterThanOrEqual(950)
  })

  test("retries a 500 up to the bound, then fails http_error", async () => {
    const { fake, env } = provider(() => ({ status: 500, errorMessage: "upstream exploded" }))
    const error = await chatError(env, hello)
    expect(fake.requests).toHaveLength(3)
    expect(error.reason).toBe("http_error")
    expect(error.status).toBe(500)
    expect(error.message).toContain("upstream exploded")
    expect(error.message).toContain("after 3 attempts")
  })

  test("TAPEDECK_LLM_MAX_RETRIES bounds the attempts; 0 means one attempt", async () => {
    const { fake, env } = provider(() => ({ status: 503 }), { TAPEDECK_LLM_MAX_RETRIES: "0" })
    const error = await chatError(env, hello)
    expect(fake.requests).toHaveLength(1)
    expect(error.status).toBe(503)
  })

  test("does not retry a 400", async () => {
    const { fake, env } = provider(() => ({ status: 400, errorMessage: "messages must not be empty" }))
    const error = await chatError(env, hello)
    expect(fake.requests).toHaveLength(1)
    expect(error.reason).toBe("http_error")
    expect(error.status).toBe(400)
    expect(error.message).toContain("HTTP 400: messages must not be empty")
  })

  test("times out a slow attempt with `timeout`, without retrying it", async () => {
    const { fake, env } = provider(() => ({ delayMs: 3_000 }), { TAPEDECK_LLM_TIMEOUT_MS: "150" })
    const started = performance.now()
    const error = await chatError(env, hello)
    expect(performance.now() - started).toBeLessThan(2_000)
    expect(error.reason).toBe("timeout")
    expect(error.message).toContain("150 ms")
    expect(fake.requests).toHaveLength(1)
  })

  test("a body that is not a completion fails bad_response, without retrying", async () => {
    const { fake, env } = provider((_, n) =>
      n === 0 ? { malformed: "{\"choices\": [{\"message\": " } : new Response(JSON.stringify({ choices: [] }), { status: 200 })
    )
    const notJson = await chatError(env, hello)
    expect(notJson.reason).toBe("bad_response")
    const noChoice = await chatError(env, hello)
    expect(noChoice.reason).toBe("bad_response")
    expect(noChoice.message).toContain("choices")
    expect(fake.requests).toHaveLength(2)
  })

  test("an unreachable provider fails network after the retries", async () => {
    const { fake, env } = provider()
    await fake.stop()
    const error = await chatError(env, hello)
    expect(error.reason).toBe("network")
    expect(error.message).toContain("after 3 attempts")
  })

  test("without TAPEDECK_LLM_BASE_URL the client is not configured", async () => {
    const env = { TAPEDECK_LLM_API_KEY: API_KEY, TAPEDECK_LLM_MODEL: "gpt-4o" }
    const llm = await Effect.runPromise(LlmClient.pipe(Effect.provide(LlmClientLive.pipe(Layer.provide(configured(env))))))
    expect(llm.configured).toBe(false)
    expect(llm.defaultModel).toBe("gpt-4o")
    const error = await chatError(env, hello)
    expect(error.reason).toBe("not_configured")
    expect(error.message).toContain("TAPEDECK_LLM_BASE_URL")
    expect((await chatError({ TAPEDECK_LLM_BASE_URL: "  " }, hello)).reason).toBe("not_configured")
  })

  test("an invalid base URL or timeout fails the layer with a ConfigError", async () => {
    for (const env of [{ TAPEDECK_LLM_BASE_URL: "not a url" }, { TAPEDECK_LLM_BASE_URL: "http://x/v1", TAPEDECK_LLM_TIMEOUT_MS: "0" }]) {
      const exit = await Effect.runPromiseExit(Layer.build(LlmClientLive.pipe(Layer.provide(configured(env)))).pipe(Effect.scoped))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(Cause.pretty((exit as Exit.Failure<unknown, unknown>).cause)).toContain(Object.keys(env).at(-1)!)
    }
  })

  test("the API key never appears in an error, even when the provider echoes it", async () => {
    const echoKey = `invalid api key ${API_KEY}`
    const scenarios: ReadonlyArray<readonly [FakeScript, Record<string, string>]> = [
      [() => ({ status: 401, errorMessage: echoKey }), {}],
      [() => ({ status: 500, errorMessage: echoKey }), {}],
      [() => new Response(`upstream says ${API_KEY}`, { status: 502 }), {}],
      [() => ({ malformed: `{"key": "${API_KEY}"}` }), {}],
      [() => ({ delayMs: 2_000 }), { TAPEDECK_LLM_TIMEOUT_MS: "50" }]
    ]
    const errors: Array<LlmUnavailable> = []
    for (const [script, extra] of scenarios) {
      const { env } = provider(script, extra)
      errors.push(await chatError(env, hello))
    }
    const { fake, env } = provider()
    await fake.stop()
    errors.push(await chatError(env, hello))
    expect(errors.map((e) => e.reason)).toEqual(["http_error", "http_error", "http_error", "bad_response", "timeout", "network"])
    for (const error of errors) {
      for (const text of renderings(error)) expect(text).not.toContain(API_KEY)
    }
    expect(errors[0]!.message).toContain("invalid api key [redacted]")
  })
})

describe("parseRetryAfter", () => {
  test("reads delay-seconds and HTTP-dates, and ignores garbage", () => {
    const now = Date.parse("2026-01-01T00:00:00Z")
    expect(parseRetryAfter("2", now)).toBe(2_000)
    expect(parseRetryAfter("0.5", now)).toBe(500)
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:07 GMT", now)).toBe(7_000)
    expect(parseRetryAfter("Wed, 31 Dec 2025 23:59:00 GMT", now)).toBe(0)
    expect(parseRetryAfter("soon", now)).toBeUndefined()
    expect(parseRetryAfter(undefined, now)).toBeUndefined()
  })
})

describe("model prices", () => {
  const prices = (env: Record<string, string>) =>
    Effect.runPromise(ModelPrices.pipe(Effect.provide(ModelPrices.Default.pipe(Layer.provide(configured(env))))))

  test("built-in defaults per million tokens", () => {
    expect(costOf(DEFAULT_PRICES, "gpt-4o", 1_000_000, 1_000_000)).toBe(12.5)
    expect(costOf(DEFAULT_PRICES, "gpt-4o-mini", 1_000, 500)).toBe(0.00045)
    expect(costOf(DEFAULT_PRICES, "claude-3-5-sonnet", 1_234, 567)).toBe(0.012207)
    expect(costOf(DEFAULT_PRICES, "gpt-4o-mini", 1_234, 567)).toBe(0.0005253)
    expect(costOf(DEFAULT_PRICES, "gemini-1.5-flash", 0, 0)).toBe(0)
    for (const model of ["gpt-4.1", "gpt-4.1-mini", "o3-mini", "claude-3-5-haiku", "claude-sonnet-4", "gemini-1.5-pro"]) {
      expect(priceOf(DEFAULT_PRICES, model)).toBeDefined()
    }
    expect(costOf(DEFAULT_PRICES, "llama-3-70b", 100, 100)).toBeUndefined()
  })

  test("dated and routed variants match the longest listed prefix, at a separator", () => {
    expect(priceOf(DEFAULT_PRICES, "gpt-4o-2024-08-06")).toEqual(priceOf(DEFAULT_PRICES, "gpt-4o"))
    expect(priceOf(DEFAULT_PRICES, "gpt-4o-mini-2024-07-18")).toEqual({ inputPerMtok: 0.15, outputPerMtok: 0.6 })
    expect(priceOf(DEFAULT_PRICES, "claude-3-5-sonnet-20241022")).toEqual({ inputPerMtok: 3, outputPerMtok: 15 })
    expect(priceOf(DEFAULT_PRICES, "claude-3-5-haiku@20241022")).toEqual({ inputPerMtok: 0.8, outputPerMtok: 4 })
    expect(priceOf(DEFAULT_PRICES, "gemini-1.5-flash-8b-001")).toEqual({ inputPerMtok: 0.0375, outputPerMtok: 0.15 })
    expect(priceOf(DEFAULT_PRICES, "openai/GPT-4o")).toEqual({ inputPerMtok: 2.5, outputPerMtok: 10 })
    expect(priceOf(DEFAULT_PRICES, "gpt-4")).toBeUndefined()
    expect(priceOf(DEFAULT_PRICES, "gpt-4ox")).toBeUndefined()
  })

  test("ModelPrices applies TAPEDECK_MODEL_PRICES over the defaults", async () => {
    const overrides = {
      "gpt-4o": { input_per_mtok: 1, output_per_mtok: 2 },
      "My-Local-Model": { input_per_mtok: 0, output_per_mtok: 0.5 }
    }
    const service = await prices({ TAPEDECK_MODEL_PRICES: JSON.stringify(overrides) })
    expect(service.costOf("gpt-4o-2024-08-06", 1_000_000, 1_000_000)).toBe(3)
    expect(service.costOf("my-local-model-v2", 10, 2_000_000)).toBe(1)
    expect(service.costOf("gpt-4o-mini", 1_000_000, 0)).toBe(0.15)
    expect(service.costOf("unknown", 1, 1)).toBeUndefined()
    expect((await prices({})).costOf("gpt-4o", 1_000_000, 0)).toBe(2.5)
    expect((await prices({ TAPEDECK_MODEL_PRICES: "" })).table).toBe(DEFAULT_PRICES)
  })

  test("aliases, -latest names and cloud prefixes resolve to a listed model", () => {
    expect(priceOf(DEFAULT_PRICES, "chatgpt-4o-latest")).toEqual(priceOf(DEFAULT_PRICES, "gpt-4o"))
    expect(priceOf(DEFAULT_PRICES, "claude-3.5-sonnet")).toEqual(priceOf(DEFAULT_PRICES, "claude-3-5-sonnet"))
    expect(priceOf(DEFAULT_PRICES, "claude-3-5-sonnet-latest")).toEqual({ inputPerMtok: 3, outputPerMtok: 15 })
    expect(priceOf(DEFAULT_PRICES, "anthropic.claude-3-5-haiku-20241022-v1:0")).toEqual({ inputPerMtok: 0.8, outputPerMtok: 4 })
    expect(priceOf(DEFAULT_PRICES, "us.anthropic.claude-3-7-sonnet-20250219-v1:0")).toEqual({ inputPerMtok: 3, outputPerMtok: 15 })
    expect(priceOf(DEFAULT_PRICES, "vertex_ai/gemini-2.0-flash-001")).toEqual({ inputPerMtok: 0.1, outputPerMtok: 0.4 })
    expect(priceOf(DEFAULT_PRICES, "acme.gpt-4o")).toBeUndefined()
  })

  test("an estimate needs a model the table knows and some tokens; a sent cost is never replaced", () => {
    expect(estimatedCost(DEFAULT_PRICES, { model: "gpt-4o", input_tokens: 1000 })).toBe(0.0025)
    expect(estimatedCost(DEFAULT_PRICES, { model: "gpt-4o", input_tokens: 0, output_tokens: 0 })).toBeUndefined()
    expect(estimatedCost(DEFAULT_PRICES, { input_tokens: 10 })).toBeUndefined()
    expect(estimatedCost(DEFAULT_PRICES, { model: "mystery", input_tokens: 10 })).toBeUndefined()
    expect(estimatedCost(DEFAULT_PRICES, { model: "claude-3-opus", input_tokens: 1e12, output_tokens: 1e12 })).toBe(1e8 * 0.9)
    const sent = { model: "gpt-4o", input_tokens: 1000, cost: 0 }
    expect(withEstimatedCost(DEFAULT_PRICES, sent)).toBe(sent)
    expect(withEstimatedCost(DEFAULT_PRICES, { model: "gpt-4o", input_tokens: 1000 }) as unknown)
      .toEqual({ model: "gpt-4o", input_tokens: 1000, cost: 0.0025, cost_estimated: true })
  })

  test("TAPEDECK_MODEL_PRICES_FILE: a file of prices under TAPEDECK_MODEL_PRICES; unreadable or invalid fails startup", async () => {
    const dir = mkdtempSync(join(tmpdir(), "prices-"))
    try {
      const file = join(dir, "prices.json")
      writeFileSync(file, JSON.stringify({ "gpt-4o": { input_per_mtok: 1, output_per_mtok: 1 }, "in-house": { input_per_mtok: 2, output_per_mtok: 2 } }))
      const service = await prices({ TAPEDECK_MODEL_PRICES_FILE: file, TAPEDECK_MODEL_PRICES: JSON.stringify({ "in-house": { input_per_mtok: 3, output_per_mtok: 3 } }) })
      expect(service.costOf("gpt-4o", 1_000_000, 0)).toBe(1)
      expect(service.costOf("in-house", 1_000_000, 0)).toBe(3)
      writeFileSync(join(dir, "bad.json"), JSON.stringify({ "gpt-4o": { input_per_mtok: "free" } }))
      for (const [path, message] of [[join(dir, "missing.json"), "cannot read"], [join(dir, "bad.json"), "input_per_mtok"]] as const) {
        const exit = await Effect.runPromiseExit(ModelPrices.pipe(
          Effect.provide(ModelPrices.Default.pipe(Layer.provide(configured({ TAPEDECK_MODEL_PRICES_FILE: path }))))
        ))
        expect(Exit.isFailure(exit)).toBe(true)
        const text = Cause.pretty((exit as Exit.Failure<unknown, unknown>).cause)
        expect(text).toContain("TAPEDECK_MODEL_PRICES_FILE")
        expect(text).toContain(message)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test("invalid TAPEDECK_MODEL_PRICES fails startup with a clear ConfigError", async () => {
    for (const value of ["{not json", "[1,2]", JSON.stringify({ "gpt-4o": { input_per_mtok: -1, output_per_mtok: 1 } }),
      JSON.stringify({ "gpt-4o": { input_per_mtok: 1 } })]) {
      const exit = await Effect.runPromiseExit(ModelPrices.pipe(
        Effect.provide(ModelPrices.Default.pipe(Layer.provide(configured({ TAPEDECK_MODEL_PRICES: value }))))
      ))
      expect(Exit.isFailure(exit)).toBe(true)
      const failure = (exit as Exit.Failure<unknown, unknown>).cause
      const [error] = Cause.failures(failure)
      expect(String((error as { _op?: string })._op)).toBe("InvalidData")
      const text = Cause.pretty(failure)
      expect(text).toContain("TAPEDECK_MODEL_PRICES")
      expect(text).toContain("input_per_mtok")
    }
  })
})
