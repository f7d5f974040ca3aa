import { Context, type Effect } from "effect"
import type { EmbedderUnavailable } from "#src/domain/Errors"

/**
 * The port that turns texts into unit-length vectors (cosine similarity = dot product). `id` names the model
 * and its dimensions: a stored vector is used only while it matches the current embedder's id.
 */
export interface EmbedderShape {
  readonly id: string
  /** extension: installed by an extension (EmbeddingProvider, docs/extensions.md). */
  readonly kind: "offline" | "openai-compatible" | "extension"
  /** Known up front for the offline embedder; a remote model's is learnt from its first answer. */
  readonly dims: number | null
  /** How many texts one call should carry at most. */
  readonly maxBatch: number
  readonly embed: (texts: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Float32Array>, EmbedderUnavailable>
}

export class Embedder extends Context.Tag("tapedeck/search/Embedder")<Embedder, EmbedderShape>() {}
