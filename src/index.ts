/**
 * Tapedeck's public API for extensions (docs/extensions.md lists it, with its version): the server as a layer, the
 * way to compose extension layers into it, and the extension points' Tags, types and errors. An extension imports
 * only this module and `tapedeck/testing`; everything else is internal.
 */
import { BunRuntime } from "@effect/platform-bun"
import { Effect, Layer } from "effect"
import {
  type ProcessedSpan,
  type SpanContext,
  type SpanProcessor,
  SpanProcessors
} from "#layers/extensions/SpanProcessors"
import { type AuthenticatedToken, Authentication, type TokenAuthenticator } from "#layers/extensions/Authentication"
import { type SinkDelivery, type TraceSink, TraceSinks } from "#layers/extensions/TraceSinks"
import { EmbeddingProvider, type ModelClient, ModelProvider, type TextEmbedder } from "#layers/extensions/Providers"
import {
  type AllowedDecisionsFilter,
  type GuardrailCheckRequest,
  type GuardrailInput,
  type GuardrailRunCounters,
  GuardrailStateUnavailable,
  type GuardrailType,
  GuardrailTypeRefused,
  GuardrailTypes,
  type GuardrailVerdict,
  installGuardrailType
} from "#layers/extensions/GuardrailTypes"
import { runServer } from "./app/Program.ts"
import { ServerLive } from "./app/Server.ts"

/** The public surface's version (docs/extensions.md): a breaking change to anything exported here raises the major. */
export const EXTENSIONS_API_VERSION = "1.2.0"

export { SpanProcessorFailed } from "./domain/Errors.ts"
export type { AccountId } from "./domain/Ids.ts"
export { Span, type SpanWire } from "./domain/Span.ts"
export { type ProcessedSpan, type SpanContext, type SpanProcessor, SpanProcessors }
export { type SinkDelivery, type TraceSink, TraceSinks }
export { type AuthenticatedToken, Authentication, type TokenAuthenticator }
export {
  type AllowedDecisionsFilter,
  type GuardrailCheckRequest,
  type GuardrailInput,
  type GuardrailRunCounters,
  GuardrailStateUnavailable,
  type GuardrailType,
  GuardrailTypeRefused,
  GuardrailTypes,
  type GuardrailVerdict
}

// Providers (docs/extensions.md, "Providers"): the model client of the judge and server replay, search's embedder.
export { EmbeddingProvider, type ModelClient, ModelProvider, type TextEmbedder }
export type { ChatMessage, ChatRequest, ChatResponse } from "#layers/llm/LlmClient"
export { EmbedderUnavailable, LlmUnavailable } from "./domain/Errors.ts"

/** Replaces the model provider of the LLM judge and server replay (the last one installed wins). */
export const modelClient = (client: ModelClient): Layer.Layer<ModelProvider> => Layer.succeed(ModelProvider, client)

/** Replaces search's embedder, for indexing and queries (the last one installed wins). */
export const embedder = (textEmbedder: TextEmbedder): Layer.Layer<EmbeddingProvider> =>
  Layer.succeed(EmbeddingProvider, textEmbedder)

/** An extension: a layer whose outputs (extension points) the server reads while it is built. */
// biome-ignore lint/suspicious/noExplicitAny: an extension outputs any of the extension points' Tags
export type Extension<E = never> = Layer.Layer<any, E>

/**
 * Installs a span processor after those already installed (extensions compose in the order given to `extend`).
 * `process` returns the span to store (rewritten or not) or `Option.none()` to drop it.
 */
export const spanProcessor = (processor: SpanProcessor): Layer.Layer<SpanProcessors> =>
  Layer.effect(
    SpanProcessors,
    Effect.map(SpanProcessors, (installed) => [...installed, processor])
  )

/** Installs a trace sink beside those already installed; each is called for every terminal trace (TraceSink). */
export const traceSink = (sink: TraceSink): Layer.Layer<TraceSinks> =>
  Layer.effect(
    TraceSinks,
    Effect.map(TraceSinks, (installed) => [...installed, sink])
  )

/** Replaces API keys and JWTs with the team's own token verification (the last one installed wins). */
export const authentication = (authenticator: TokenAuthenticator): Layer.Layer<Authentication> =>
  Layer.succeed(Authentication, authenticator)

/**
 * Installs a guardrail type: a policy `type` of one's own, with its params' schema and its evaluator. The server does
 * not start (GuardrailTypeRefused) if the name is malformed, a built-in type's, or installed twice.
 */
export const guardrailType = <P, E>(
  definition: GuardrailType<P, E>
): Layer.Layer<GuardrailTypes, GuardrailTypeRefused> =>
  // biome-ignore lint/suspicious/noExplicitAny: the registry holds types with params of their own
  Layer.effect(GuardrailTypes, installGuardrailType(definition as GuardrailType<any, unknown>))

/** Composes extensions into a server layer, in order: each sees what the ones before it installed. */
export const extend =
  (...extensions: ReadonlyArray<Extension<unknown>>) =>
  <A, E, R>(server: Layer.Layer<A, E, R>): Layer.Layer<A, unknown, R> =>
    // The first extension is provided outermost, so each later one is built seeing what the earlier ones installed.
    extensions.reduceRight<Layer.Layer<A, unknown, R>>(
      (built, extension) => built.pipe(Layer.provide(extension as Layer.Layer<never, unknown>)),
      server
    )

export const Tapedeck = {
  /** The whole server, configured from the environment (docs/configuration.md): what `npm start` runs. */
  server: ServerLive,
  extend,
  /**
   * Runs a server layer as the service with BunRuntime.runMain: one process, or TAPEDECK_WORKERS processes on one
   * port (each runs this same program, so each has the same extensions).
   */
  main: <E>(server: Layer.Layer<never, E>) => runServer(server).pipe(BunRuntime.runMain({ disablePrettyLogger: true }))
} as const
