import { Duration, Effect, Layer, Option, Redacted, Schedule, Schema } from "effect"
import { Embedder, type EmbedderShape } from "./Embedder.ts"
import { OfflineEmbedderLive } from "./OfflineEmbedder.ts"
import { embedderOf, embedderProblem, EmbeddingProvider } from "../extensions/Providers.ts"
import { AppConfig, type EmbeddingsSettings } from "../config/AppConfig.ts"
import { EmbedderUnavailable, EmbeddingRetryable } from "#src/domain/Errors"

/** Characters of one text sent at most (≈ 2k tokens: every common embedding model takes that). */
export const MAX_INPUT_CHARS = 8000

const EmbeddingsResponse = Schema.Struct({
  data: Schema.Array(
    Schema.Struct({
      index: Schema.optional(Schema.Int),
      embedding: Schema.Array(Schema.Number).pipe(Schema.minItems(1))
    })
  )
})
const decodeResponse = Schema.decodeUnknownEither(EmbeddingsResponse)

const normalise = (values: ReadonlyArray<number>) => {
  const out = Float32Array.from(values)
  let norm = 0
  for (const x of out) norm += x * x
  norm = Math.sqrt(norm)
  if (norm > 0) for (let i = 0; i < out.length; i++) out[i]! /= norm
  return out
}

/**
 * Any OpenAI-compatible `POST {base}/embeddings` (OpenAI, Ollama, vLLM, TEI, LiteLLM…): texts sent in batches
 * of TAPEDECK_EMBEDDINGS_BATCH_SIZE, each call bounded by a timeout and retried on 429, 5xx and network errors.
 * Vectors are L2-normalised on arrival. The key is sent as a Bearer token and never appears in an error.
 */
export const makeOpenAiEmbedder = (
  settings: Omit<EmbeddingsSettings, "baseUrl"> & { readonly baseUrl: string }
): EmbedderShape => {
  const endpoint = `${settings.baseUrl}/embeddings`
  const host = new URL(settings.baseUrl).host
  const key = Option.getOrUndefined(Option.map(settings.apiKey, Redacted.value))
  const scrub = (text: string) => (key === undefined ? text : text.split(key).join("[redacted]"))
  const dims = Option.getOrNull(settings.dimensions)
  const id = `openai-compatible:${settings.model}${dims === null ? "" : `:${dims}`}`

  const call = (texts: ReadonlyArray<string>) =>
    Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(endpoint, {
          method: "POST",
          signal: AbortSignal.any([signal, AbortSignal.timeout(settings.timeoutMs)]),
          headers: {
            "content-type": "application/json",
            accept: "application/json",
            ...(key === undefined ? {} : { authorization: `Bearer ${key}` })
          },
          body: JSON.stringify({
            model: settings.model,
            input: texts.map((t) => (t === "" ? " " : t.slice(0, MAX_INPUT_CHARS))),
            ...(dims === null ? {} : { dimensions: dims })
          })
        })
        return { status: response.status, text: await response.text() }
      },
      catch: (cause) =>
        new EmbeddingRetryable({
          reason: scrub(`could not reach the embeddings provider at ${host}: ${String(cause)}`)
        })
    }).pipe(
      Effect.flatMap(
        ({ status, text }): Effect.Effect<Array<Float32Array>, EmbeddingRetryable | EmbedderUnavailable> => {
          if (status === 429 || status >= 500) {
            return Effect.fail(
              new EmbeddingRetryable({ reason: `embeddings provider at ${host} answered HTTP ${status}` })
            )
          }
          if (status < 200 || status >= 300) {
            return Effect.fail(
              new EmbedderUnavailable({
                reason: scrub(`embeddings provider at ${host} answered HTTP ${status}: ${text.slice(0, 300)}`)
              })
            )
          }
          let parsed: unknown
          try {
            parsed = JSON.parse(text)
          } catch {
            return Effect.fail(
              new EmbedderUnavailable({ reason: `embeddings provider at ${host} answered something that is not JSON` })
            )
          }
          const decoded = decodeResponse(parsed)
          if (decoded._tag === "Left" || decoded.right.data.length !== texts.length) {
            return Effect.fail(
              new EmbedderUnavailable({
                reason: `embeddings provider at ${host} did not answer one embedding per input`
              })
            )
          }
          const ordered = [...decoded.right.data].sort((a, b) => (a.index ?? 0) - (b.index ?? 0))
          const width = ordered[0]!.embedding.length
          if (ordered.some((d) => d.embedding.length !== width) || (dims !== null && width !== dims)) {
            return Effect.fail(
              new EmbedderUnavailable({ reason: `embeddings provider at ${host} answered vectors of differing sizes` })
            )
          }
          return Effect.succeed(ordered.map((d) => normalise(d.embedding)))
        }
      ),
      Effect.retry({
        while: (e) => e._tag === "EmbeddingRetryable",
        schedule: Schedule.exponential(Duration.millis(200)).pipe(
          Schedule.intersect(Schedule.recurs(settings.maxRetries))
        )
      }),
      Effect.catchTag("EmbeddingRetryable", (e) => Effect.fail(new EmbedderUnavailable({ reason: e.reason })))
    )

  return {
    id,
    kind: "openai-compatible",
    dims,
    maxBatch: settings.batchSize,
    embed: Effect.fn("Embedder.embed")(function* (texts: ReadonlyArray<string>) {
      const out: Array<Float32Array> = []
      for (let i = 0; i < texts.length; i += settings.batchSize) {
        out.push(...(yield* call(texts.slice(i, i + settings.batchSize))))
      }
      return out
    })
  }
}

/**
 * An embedder installed by an extension (EmbeddingProvider) first; else TAPEDECK_EMBEDDINGS_BASE_URL set: that
 * provider; unset: the offline embedder.
 */
export const EmbedderLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const installed = yield* EmbeddingProvider
    if (installed !== undefined) {
      const problem = embedderProblem(installed)
      if (problem !== undefined) return yield* Effect.dieMessage(`the installed embedder cannot be used: ${problem}`)
      return Layer.succeed(Embedder, embedderOf(installed))
    }
    const settings = (yield* AppConfig).embeddings
    return Option.match(settings.baseUrl, {
      onNone: () => OfflineEmbedderLive,
      onSome: (baseUrl) => Layer.succeed(Embedder, makeOpenAiEmbedder({ ...settings, baseUrl }))
    })
  })
)
