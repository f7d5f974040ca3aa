import { FetchHttpClient, HttpClient, type HttpClientError, HttpClientRequest } from "@effect/platform"
import {
  Clock,
  type ConfigError,
  Duration,
  Effect,
  Either,
  Layer,
  Option,
  ParseResult,
  Random,
  Redacted,
  Schema
} from "effect"
import { CHAT_REQUEST_OPTIONS, type ChatRequest, type ChatResponse, LlmClient } from "./LlmClient.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { LlmUnavailable } from "#src/domain/Errors"
import { llmClientOf, ModelProvider } from "../extensions/Providers.ts"

/** The longest wait between attempts: a larger Retry-After is cut to this, and so is the backoff. */
export const MAX_RETRY_DELAY_MS = 30_000

const NOT_CONFIGURED = "no LLM provider is configured (set TAPEDECK_LLM_BASE_URL)"

/** What may be absent or null in a completion is absent or null somewhere among OpenAI-compatible providers. */
const ChatCompletion = Schema.Struct({
  model: Schema.optional(Schema.NullOr(Schema.String)),
  choices: Schema.NonEmptyArray(
    Schema.Struct({
      message: Schema.Struct({
        content: Schema.optional(Schema.NullOr(Schema.String)),
        tool_calls: Schema.optional(Schema.NullOr(Schema.Array(Schema.Unknown)))
      }),
      finish_reason: Schema.optional(Schema.NullOr(Schema.String))
    })
  ),
  usage: Schema.optional(
    Schema.NullOr(
      Schema.Struct({
        prompt_tokens: Schema.optional(Schema.NullOr(Schema.NonNegativeInt)),
        completion_tokens: Schema.optional(Schema.NullOr(Schema.NonNegativeInt))
      })
    )
  )
})
const decodeCompletion = Schema.decodeUnknownEither(Schema.parseJson(ChatCompletion))

/** The error body of an OpenAI-compatible provider, `{ error: { message } }`, when it has one. */
const ProviderError = Schema.parseJson(Schema.Struct({ error: Schema.Struct({ message: Schema.String }) }))
const decodeProviderError = Schema.decodeUnknownOption(ProviderError)

/**
 * The delay a Retry-After header asks for, in milliseconds: delay-seconds or an HTTP-date. Undefined when the
 * header is absent or unreadable.
 */
export const parseRetryAfter = (header: string | undefined, nowMs: number): number | undefined => {
  if (header === undefined) return undefined
  const value = header.trim()
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs)
}

/** Parse issues as `path: message; …`, short enough for an error message. */
const describeIssues = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => `${issue.path.length === 0 ? "(root)" : issue.path.join(".")}: ${issue.message}`)
    .join("; ")

interface ProviderSettings {
  readonly baseUrl: string
  readonly apiKey: Option.Option<Redacted.Redacted>
  readonly defaultModel: string | undefined
  readonly timeoutMs: number
  readonly maxRetries: number
  readonly retryBaseMs: number
}

/** A failed attempt, and whether another attempt may succeed. */
interface AttemptFailure {
  readonly error: LlmUnavailable
  readonly retryable: boolean
  readonly retryAfterMs?: number | undefined
}

const wireBody = (request: ChatRequest, model: string) => {
  const body: Record<string, unknown> = { model, messages: request.messages }
  for (const name of CHAT_REQUEST_OPTIONS) if (request[name] !== undefined) body[name] = request[name]
  return body
}

const clip = (text: string, max = 300) => (text.length > max ? `${text.slice(0, max)}…` : text)

const modelOf = (request: ChatRequest, defaultModel: string | undefined) =>
  request.model !== "" ? request.model : (defaultModel ?? "")

const notConfigured = (defaultModel: string | undefined) =>
  LlmClient.of({
    configured: false,
    defaultModel,
    chat: Effect.fn("LlmClient.chat")(function* (request: ChatRequest) {
      yield* Effect.annotateCurrentSpan("gen_ai.request.model", modelOf(request, defaultModel))
      return yield* new LlmUnavailable({ reason: "not_configured", message: NOT_CONFIGURED })
    })
  })

const makeProvider = (settings: ProviderSettings) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const endpoint = `${settings.baseUrl}/chat/completions`
    // The host only: a base URL may carry user:password, which must not reach an error message either.
    const host = new URL(settings.baseUrl).host
    const key = Option.getOrUndefined(Option.map(settings.apiKey, Redacted.value))
    const withAuth = Option.match(settings.apiKey, {
      onNone: () => (request: HttpClientRequest.HttpClientRequest) => request,
      onSome: (apiKey) => HttpClientRequest.bearerToken(apiKey)
    })

    // Provider bodies and transport errors are quoted in messages; a provider that echoes the key gets it cut.
    const scrub = (text: string) => (key === undefined ? text : text.split(key).join("[redacted]"))
    const unavailable = (reason: LlmUnavailable["reason"], message: string, status?: number) =>
      new LlmUnavailable({ reason, message: scrub(message), ...(status === undefined ? {} : { status }) })

    const networkFailure = (e: HttpClientError.HttpClientError): AttemptFailure => {
      const cause = e.description === undefined && e.cause instanceof Error ? `: ${e.cause.message}` : ""
      return {
        error: unavailable("network", `could not reach the LLM provider at ${host}: ${e.message}${cause}`),
        retryable: true
      }
    }

    const statusFailure = (status: number, body: string, retryAfter: string | undefined, nowMs: number) => {
      const detail = Option.match(decodeProviderError(body), {
        onNone: () => body.trim(),
        onSome: (parsed) => parsed.error.message
      })
      const error = unavailable(
        "http_error",
        `LLM provider at ${host} answered HTTP ${status}${detail === "" ? "" : `: ${clip(detail)}`}`,
        status
      )
      const retryable = status === 429 || status >= 500
      return { error, retryable, retryAfterMs: parseRetryAfter(retryAfter, nowMs) } satisfies AttemptFailure
    }

    const attempt = (body: unknown, model: string) =>
      Effect.gen(function* () {
        const response = yield* client
          .execute(
            withAuth(
              HttpClientRequest.post(endpoint).pipe(
                HttpClientRequest.acceptJson,
                HttpClientRequest.bodyUnsafeJson(body)
              )
            )
          )
          .pipe(Effect.mapError(networkFailure))
        const text = yield* response.text.pipe(Effect.mapError(networkFailure))
        if (response.status < 200 || response.status >= 300) {
          const nowMs = yield* Clock.currentTimeMillis
          return yield* Effect.fail(statusFailure(response.status, text, response.headers["retry-after"], nowMs))
        }
        const completion = yield* Either.match(decodeCompletion(text), {
          onLeft: (e) =>
            Effect.fail<AttemptFailure>({
              error: unavailable(
                "bad_response",
                `LLM provider at ${host} answered HTTP ${response.status} with something that is not a chat completion: ${clip(
                  describeIssues(e)
                )}`
              ),
              retryable: false
            }),
          onRight: Effect.succeed
        })
        const choice = completion.choices[0]
        const toolCalls = choice.message.tool_calls
        return {
          model: completion.model ?? model,
          message: {
            role: "assistant",
            content: choice.message.content ?? null,
            ...(toolCalls === undefined || toolCalls === null || toolCalls.length === 0
              ? {}
              : { tool_calls: toolCalls })
          },
          usage: {
            inputTokens: completion.usage?.prompt_tokens ?? 0,
            outputTokens: completion.usage?.completion_tokens ?? 0
          },
          finishReason: choice.finish_reason ?? null
        } satisfies ChatResponse
      }).pipe(
        // A timed-out attempt is not retried: the provider may still be generating, and a retry would pay twice.
        Effect.timeoutFail({
          duration: Duration.millis(settings.timeoutMs),
          onTimeout: (): AttemptFailure => ({
            error: unavailable("timeout", `LLM provider at ${host} did not answer within ${settings.timeoutMs} ms`),
            retryable: false
          })
        })
      )

    /** Full delay up to the cap, then a random 50–100 % of it, so clients that failed together spread out. */
    const backoffMs = (retry: number) =>
      Random.nextRange(0.5, 1).pipe(
        Effect.map((jitter) => Math.min(MAX_RETRY_DELAY_MS, settings.retryBaseMs * 2 ** Math.min(retry, 30)) * jitter)
      )

    const chat = Effect.fn("LlmClient.chat")(function* (request: ChatRequest) {
      const model = modelOf(request, settings.defaultModel)
      yield* Effect.annotateCurrentSpan("gen_ai.request.model", model)
      const body = wireBody(request, model)
      const attempts = settings.maxRetries + 1
      for (let n = 1; ; n++) {
        const outcome = yield* Effect.either(attempt(body, model))
        if (Either.isRight(outcome)) {
          const response = outcome.right
          yield* Effect.annotateCurrentSpan({
            "gen_ai.response.model": response.model,
            "gen_ai.usage.input_tokens": response.usage.inputTokens,
            "gen_ai.usage.output_tokens": response.usage.outputTokens,
            "llm.attempts": n
          })
          return response
        }
        const failure = outcome.left
        if (!failure.retryable || n >= attempts) {
          yield* Effect.annotateCurrentSpan("llm.attempts", n)
          if (n === 1) return yield* failure.error
          const { message, reason, status } = failure.error
          return yield* new LlmUnavailable({
            reason,
            message: `${message} (after ${n} attempts)`,
            ...(status === undefined ? {} : { status })
          })
        }
        const delayMs =
          failure.retryAfterMs === undefined
            ? yield* backoffMs(n - 1)
            : Math.min(MAX_RETRY_DELAY_MS, failure.retryAfterMs)
        yield* Effect.logDebug(`LLM attempt ${n} of ${attempts} failed; retrying in ${Math.round(delayMs)} ms`).pipe(
          Effect.annotateLogs({ reason: failure.error.reason, status: failure.error.status })
        )
        yield* Effect.sleep(Duration.millis(delayMs))
      }
    })

    return LlmClient.of({ configured: true, defaultModel: settings.defaultModel, baseUrl: settings.baseUrl, chat })
  })

/**
 * The model client an extension installed (ModelProvider), else an OpenAI-compatible Chat Completions provider at
 * `TAPEDECK_LLM_BASE_URL` (`…/v1`), or, when that is unset, a
 * client whose every call fails `not_configured`. Attempts time out after `TAPEDECK_LLM_TIMEOUT_MS`; 429, 5xx and
 * network failures are retried up to `TAPEDECK_LLM_MAX_RETRIES` times, after the provider's Retry-After or an
 * exponential backoff from `TAPEDECK_LLM_RETRY_BASE_MS` with jitter.
 */
export const LlmClientLive: Layer.Layer<LlmClient, ConfigError.ConfigError> = Layer.unwrapEffect(
  Effect.gen(function* () {
    const settings = (yield* AppConfig).llm
    // A model client installed by an extension replaces the configured provider (docs/extensions.md, "Providers").
    const installed = yield* ModelProvider
    if (installed !== undefined) return Layer.succeed(LlmClient, llmClientOf(installed, settings.defaultModel))
    return Option.match(settings.baseUrl, {
      onNone: () => Layer.succeed(LlmClient, notConfigured(settings.defaultModel)),
      onSome: (baseUrl) =>
        Layer.effect(LlmClient, makeProvider({ ...settings, baseUrl })).pipe(Layer.provide(FetchHttpClient.layer))
    })
  })
).pipe(Layer.provide(AppConfig.Default))
