import { Effect, Layer, Runtime } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { Embedder } from "./Embedder.ts"
import { chunkMemo, chunkWords } from "./Tokenize.ts"
import { loadWordVectors, SOURCE_VOCABULARY, type WordVectors } from "./WordVectors.ts"

/** Dimensions taken by hashed lexical features (whole words, identifiers, character n-grams of unknown words). */
export const HASH_DIMS = 156
/** SIF smoothing: a word of probability p weighs A / (A + p). */
const A = 1e-3
/** Share of the final (unit) vector held by the semantic part and by the hashed lexical part. */
const SEMANTIC = 0.9
const LEXICAL = Math.sqrt(1 - SEMANTIC * SEMANTIC)
/** How much a known word also counts as an exact lexical feature, relative to an unknown word. */
const KNOWN_WORD_LEXICAL = 0.5
const HARMONIC = Math.log(SOURCE_VOCABULARY) + 0.5772

/** Zipf estimate of a word's probability from its frequency rank (0 = most frequent). */
const probability = (rank: number) => 1 / ((rank + 1) * HARMONIC)

export { tokenize } from "./Tokenize.ts"

/** FNV-1a, 32-bit. */
const hash = (s: string, seed = 0x811c9dc5) => {
  let h = seed
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/** The p(w)-weighted mean of the vocabulary's vectors: the common direction SIF removes from every sentence. */
const commonComponent = (wv: WordVectors) => {
  const c = new Float64Array(wv.dims)
  for (let row = 0; row < wv.count; row++) {
    const w = probability(wv.ranks[row]!) * wv.scales[row]!
    const base = row * wv.dims
    for (let d = 0; d < wv.dims; d++) c[d]! += w * wv.vectors[base + d]!
  }
  const norm = Math.hypot(...c)
  if (norm > 0) for (let d = 0; d < wv.dims; d++) c[d]! /= norm
  return c
}

/**
 * `Math.hypot(...xs)`, the same number, without spreading a typed array into arguments (which goes through its
 * iterator, several times slower for the two norms of every embedding).
 */
const hypot = (xs: Float64Array): number => Reflect.apply(Math.hypot, undefined, xs)

const NONE: ReadonlyArray<never> = []

/** What one chunk of text (Tokenize.ts) adds to an embedding, in the order the words come. */
interface ChunkFeatures {
  /** Vocabulary rows of its known words. */
  readonly rows: ReadonlyArray<number>
  /** Its hashed lexical features: dimension and signed weight. */
  readonly lexicalDims: ReadonlyArray<number>
  readonly lexicalWeights: ReadonlyArray<number>
}

/**
 * The offline embedding of a text: a SIF-weighted average of GloVe vectors (the common component removed)
 * beside hashed lexical features (known words at half weight, identifiers, and character 3- and 4-grams of
 * unknown words, so "ETIMEDOUT" and "timed out" share something), each part normalised, the whole unit-length.
 *
 * What a chunk of text contributes is computed once and kept in a bounded memo (the words of agent spans repeat
 * a lot); it is added in the original order, so the result is exactly that of embedding word by word.
 */
export const makeOfflineEmbedding = (wv: WordVectors) => {
  const dims = wv.dims + HASH_DIMS
  const common = commonComponent(wv)
  const weights = new Float64Array(wv.count)
  for (let row = 0; row < wv.count; row++) weights[row] = A / (A + probability(wv.ranks[row]!))
  const rowWeights = new Float64Array(wv.count)
  for (let row = 0; row < wv.count; row++) rowWeights[row] = weights[row]! * wv.scales[row]!

  const chunkFeatures = (chunk: string, ascii: boolean): ChunkFeatures => {
    const rows: Array<number> = []
    const featureDims: Array<number> = []
    const featureWeights: Array<number> = []
    const feature = (key: string, weight: number) => {
      const h = hash(key)
      featureDims.push((h >>> 1) % HASH_DIMS)
      featureWeights.push(h & 1 ? weight : -weight)
    }
    chunkWords(
      chunk,
      ascii,
      (word) => {
        const row = wv.index.get(word)
        if (row !== undefined) {
          rows.push(row)
          feature(word, KNOWN_WORD_LEXICAL * weights[row]!)
          return
        }
        feature(word, 1)
        if (word.length < 4 || /^\p{N}+$/u.test(word)) return
        const marked = `<${word}>`
        const grams = (marked.length - 2) + (marked.length - 3)
        for (let n = 3; n <= 4; n++) {
          for (let i = 0; i + n <= marked.length; i++) feature(`#${marked.slice(i, i + n)}`, 1 / Math.sqrt(grams))
        }
      },
      (identifier) => feature(identifier, 1)
    )
    // Most chunks are one word: empty lists are shared, to keep the memo small.
    const kept = <A>(xs: Array<A>): ReadonlyArray<A> => xs.length === 0 ? NONE : xs
    return { rows: kept(rows), lexicalDims: kept(featureDims), lexicalWeights: kept(featureWeights) }
  }
  const features = chunkMemo(16_384, 48, chunkFeatures)
  const wordDims = wv.dims
  const unrolled = wordDims - (wordDims % 4)
  const vectors = wv.vectors

  return (input: string): Float32Array => {
    const semantic = new Float64Array(wv.dims)
    const lexical = new Float64Array(HASH_DIMS)
    const add = (f: ChunkFeatures) => {
      for (let k = 0; k < f.rows.length; k++) {
        const row = f.rows[k]!
        const w = rowWeights[row]!
        const base = row * wordDims
        // Unrolled by four (each dimension still sums in word order): the hottest loop of the embedder.
        let d = 0
        for (; d < unrolled; d += 4) {
          semantic[d]! += w * vectors[base + d]!
          semantic[d + 1]! += w * vectors[base + d + 1]!
          semantic[d + 2]! += w * vectors[base + d + 2]!
          semantic[d + 3]! += w * vectors[base + d + 3]!
        }
        for (; d < wordDims; d++) semantic[d]! += w * vectors[base + d]!
      }
      for (let k = 0; k < f.lexicalDims.length; k++) lexical[f.lexicalDims[k]!]! += f.lexicalWeights[k]!
    }
    features(input, add)

    let dot = 0
    for (let d = 0; d < wv.dims; d++) dot += semantic[d]! * common[d]!
    for (let d = 0; d < wv.dims; d++) semantic[d]! -= dot * common[d]!
    const sNorm = hypot(semantic)
    const lNorm = hypot(lexical)
    const sWeight = sNorm === 0 ? 0 : (lNorm === 0 ? 1 : SEMANTIC) / sNorm
    const lWeight = lNorm === 0 ? 0 : (sNorm === 0 ? 1 : LEXICAL) / lNorm
    const out = new Float32Array(dims)
    for (let d = 0; d < wv.dims; d++) out[d] = semantic[d]! * sWeight
    for (let d = 0; d < HASH_DIMS; d++) out[wv.dims + d] = lexical[d]! * lWeight
    return out
  }
}

export const OFFLINE_DIMS = 100 + HASH_DIMS
export const OFFLINE_EMBEDDER_ID = `offline:glove-sg100d-sif+hash${HASH_DIMS}:v2:${OFFLINE_DIMS}`

// One read-only copy per process (several servers in one test process share it).
let shared: Promise<WordVectors> | undefined

/**
 * The default embedder: no network, no download. The word vectors are compacted from the installed npm
 * package at the first start and cached (see WordVectors.ts). Loading starts in the background when the layer
 * is built, so the server answers at once; the first embedding waits for it.
 */
export const OfflineEmbedderLive = Layer.scoped(
  Embedder,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const runtime = yield* Effect.runtime<never>()
    const log = (message: string) => Runtime.runSync(runtime)(Effect.logInfo(`search: ${message}`))
    const load = Effect.tryPromise({
      try: () => (shared ??= loadWordVectors(config.dataDir, log).catch((e) => {
        shared = undefined
        throw e
      })),
      catch: (cause) => new Error(`the offline embedder could not load its word vectors: ${String(cause)}`)
    }).pipe(
      Effect.map(makeOfflineEmbedding),
      Effect.tap(() => Effect.logDebug(`search: offline embedder ready (${OFFLINE_DIMS} dimensions)`)),
      Effect.orDie
    )
    const ready = yield* Effect.cached(load)
    yield* Effect.forkScoped(ready)
    return Embedder.of({
      id: OFFLINE_EMBEDDER_ID,
      kind: "offline",
      dims: OFFLINE_DIMS,
      // Embedding runs on the event loop: small batches keep each uninterrupted stretch short, so requests are
      // answered between two batches.
      maxBatch: 32,
      embed: (texts) => Effect.map(ready, (embedOne) => texts.map(embedOne))
    })
  })
)
