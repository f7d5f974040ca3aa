import { Cause, Context, Effect, Option } from "effect"
import { EmbedderUnavailable, LlmUnavailable } from "#src/domain/Errors"
import type { ChatRequest, ChatResponse } from "../llm/LlmClient.ts"
import type { EmbedderShape } from "../search/Embedder.ts"

/**
 * A team's own model client (an extension): replaces the OpenAI-compatible provider for the LLM judge of
 * evaluations and for server replay of forks. It receives the same Chat Completions request the built-in client
 * would send (`model` is the judge model or the recorded span's model) and answers with the first choice.
 */
export interface ModelClient {
  readonly name: string
  /** The model for a replayed span that recorded none; absent: TAPEDECK_LLM_MODEL. */
  readonly defaultModel?: string
  /**
   * Fails with `LlmUnavailable` to choose the reason shown; any other failure or a defect is reported as the
   * client's failure (`bad_response`), never as a crash of the judge or the replay.
   */
  readonly chat: (request: ChatRequest) => Effect.Effect<ChatResponse, unknown>
}

/** The installed model client, if any (none: TAPEDECK_LLM_BASE_URL's provider, or not configured). */
export class ModelProvider extends Context.Reference<ModelProvider>()("tapedeck/ModelProvider", {
  defaultValue: (): ModelClient | undefined => undefined
}) {}

/**
 * A team's own embedding model (an extension): replaces the offline embedder and TAPEDECK_EMBEDDINGS_BASE_URL's for
 * search (indexing and queries). Vectors are normalised to unit length by the server.
 */
export interface TextEmbedder {
  /** Names the model and its dimensions: stored vectors of another id are embedded again. */
  readonly id: string
  readonly dimensions: number
  /** How many texts one `embed` call carries at most (default 32). */
  readonly maxBatch?: number
  /** One vector of `dimensions` numbers per text, in order. */
  readonly embed: (texts: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ArrayLike<number>>, unknown>
}

/** The installed embedder, if any (none: the offline embedder or TAPEDECK_EMBEDDINGS_BASE_URL's). */
export class EmbeddingProvider extends Context.Reference<EmbeddingProvider>()("tapedeck/EmbeddingProvider", {
  defaultValue: (): TextEmbedder | undefined => undefined
}) {}

const describe = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  const reason = Option.isSome(failure) ? failure.value : Cause.squash(cause)
  if (reason instanceof Error) return reason.message
  return typeof reason === "string" ? reason : (JSON.stringify(reason) ?? String(reason))
}

/** Anything but an interruption becomes `onFailure`'s error: an extension fails the call, never the server. */
const contain = <A, E>(
  effect: () => Effect.Effect<A, unknown>,
  onFailure: (cause: Cause.Cause<unknown>) => E
): Effect.Effect<A, E> =>
  Effect.suspend(effect).pipe(
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.failCause(cause as Cause.Cause<never>) : Effect.fail(onFailure(cause))
    )
  )

/** The LlmClient shape of an installed model client; `baseUrl` is `extension:<name>` (the judge keys memory by it). */
export const llmClientOf = (client: ModelClient, fallbackModel: string | undefined) => ({
  configured: true,
  defaultModel: client.defaultModel ?? fallbackModel,
  baseUrl: `extension:${client.name}`,
  chat: (request: ChatRequest): Effect.Effect<ChatResponse, LlmUnavailable> =>
    contain(
      () => client.chat(request),
      (cause) => {
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure) && failure.value instanceof LlmUnavailable) return failure.value
        return new LlmUnavailable({
          reason: "bad_response",
          message: `model client "${client.name}" failed: ${describe(cause)}`
        })
      }
    )
})

/** Why an embedder cannot be installed, or undefined. */
export const embedderProblem = (embedder: TextEmbedder): string | undefined => {
  if (typeof embedder.id !== "string" || embedder.id.trim() === "" || embedder.id.length > 200)
    return "its id must be 1 to 200 characters"
  if (!Number.isInteger(embedder.dimensions) || embedder.dimensions < 1 || embedder.dimensions > 16_000)
    return "its dimensions must be an integer from 1 to 16000"
  if (embedder.maxBatch !== undefined && (!Number.isInteger(embedder.maxBatch) || embedder.maxBatch < 1))
    return "its maxBatch must be a positive integer"
  return undefined
}

/**
 * The Embedder shape of an installed embedder: each answer checked (one vector per text, of the declared
 * dimensions, finite numbers) and normalised; a failure, a defect or a wrong answer is `EmbedderUnavailable`.
 */
export const embedderOf = (embedder: TextEmbedder): EmbedderShape => {
  const dims = embedder.dimensions
  const unavailable = (reason: string) => new EmbedderUnavailable({ reason: `embedder "${embedder.id}" ${reason}` })
  return {
    id: embedder.id,
    kind: "extension",
    dims,
    maxBatch: embedder.maxBatch ?? 32,
    embed: (texts) =>
      contain(
        () => embedder.embed(texts),
        (cause) => unavailable(`failed: ${describe(cause)}`)
      ).pipe(
        Effect.flatMap((vectors) => {
          if (!Array.isArray(vectors) || vectors.length !== texts.length)
            return Effect.fail(unavailable(`answered ${vectors?.length} vectors for ${texts.length} texts`))
          const out: Array<Float32Array> = []
          for (const vector of vectors) {
            if (vector?.length !== dims)
              return Effect.fail(unavailable(`answered a vector of ${vector?.length} dimensions, not ${dims}`))
            const unit = new Float32Array(dims)
            let norm = 0
            for (let i = 0; i < dims; i++) {
              const x = vector[i]!
              if (typeof x !== "number" || !Number.isFinite(x))
                return Effect.fail(unavailable("answered a vector with a value that is not a finite number"))
              unit[i] = x
              norm += x * x
            }
            norm = Math.sqrt(norm)
            if (norm > 0) for (let i = 0; i < dims; i++) unit[i] = unit[i]! / norm
            out.push(unit)
          }
          return Effect.succeed(out)
        })
      )
  }
}
