import { Effect } from "effect"
import { embedder } from "tapedeck"

/** Words the team's vocabulary treats as one: each maps to the first of its group. */
const SYNONYMS: ReadonlyArray<ReadonlyArray<string>> = [
  ["flurb", "quaxle"],
  ["refund", "chargeback", "reimbursement"]
]
const CANONICAL = new Map(SYNONYMS.flatMap((group) => group.map((word) => [word, group[0]!] as const)))

export const DIMENSIONS = 64
export const EMBEDDER_ID = `example:word-hash-synonyms:v1:${DIMENSIONS}`

/** FNV-1a, 32 bits. */
const hash = (word: string) => {
  let h = 0x811c9dc5
  for (let i = 0; i < word.length; i++) h = Math.imul(h ^ word.charCodeAt(i), 0x01000193) >>> 0
  return h
}

/**
 * A tiny deterministic embedder: each lowercase word (synonyms folded) adds ±1 to the dimension its hash picks. The
 * server normalises the vectors; a text with no word is the zero vector.
 */
export const embedText = (text: string): ReadonlyArray<number> => {
  const vector = new Array<number>(DIMENSIONS).fill(0)
  for (const raw of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    const h = hash(CANONICAL.get(raw) ?? raw)
    vector[h % DIMENSIONS]! += h & 0x8000_0000 ? -1 : 1
  }
  return vector
}

/** Every text it was asked to embed, in order (for the tests). */
export const embedded: Array<string> = []

export const WordHashEmbedderLive = embedder({
  id: EMBEDDER_ID,
  dimensions: DIMENSIONS,
  maxBatch: 16,
  embed: (texts) =>
    Effect.sync(() => {
      embedded.push(...texts)
      return texts.map(embedText)
    })
})
