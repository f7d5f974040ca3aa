/**
 * The fast paths of the offline search text processing against the straightforward code they replaced (kept
 * here as references): the tokenizer, the embedding itself (bit for bit) and the
 * SQL text of a vector.
 */
import { beforeAll, describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { HASH_DIMS, makeOfflineEmbedding, tokenize } from "#layers/search/OfflineEmbedder"
import { chunkMemo, forEachChunk } from "#src/domain/search/Tokenize"
import { vectorLiteral } from "#layers/search/VectorText"
import { loadWordVectors, SOURCE_VOCABULARY, type WordVectors } from "#layers/search/WordVectors"

// ------------------------------------------------------------------------------------------------ references

const RAW = /[\p{L}\p{N}_]+/gu
const PART = /\p{Lu}+(?!\p{Ll})|\p{Lu}?\p{Ll}+|\p{N}+|\p{L}+/gu

const referenceTokenize = (
  text: string,
  onPart: (word: string) => void,
  onIdentifier: (identifier: string) => void
) => {
  for (const raw of text.matchAll(RAW)) {
    const token = raw[0]
    let parts = 0
    for (const piece of token.split("_")) {
      if (piece === "") continue
      for (const part of piece.matchAll(PART)) {
        onPart(part[0].toLowerCase())
        parts++
      }
    }
    if (parts > 1) onIdentifier(token.toLowerCase())
  }
}

/** The embedder as it was before the memo and the fast tokenizer (same constants). */
const referenceEmbedding = (wv: WordVectors) => {
  const A = 1e-3
  const SEMANTIC = 0.9
  const LEXICAL = Math.sqrt(1 - SEMANTIC * SEMANTIC)
  const KNOWN_WORD_LEXICAL = 0.5
  const HARMONIC = Math.log(SOURCE_VOCABULARY) + 0.5772
  const probability = (rank: number) => 1 / ((rank + 1) * HARMONIC)
  const hash = (s: string, seed = 0x811c9dc5) => {
    let h = seed
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i)
      h = Math.imul(h, 0x01000193)
    }
    return h >>> 0
  }
  const common = new Float64Array(wv.dims)
  for (let row = 0; row < wv.count; row++) {
    const w = probability(wv.ranks[row]!) * wv.scales[row]!
    for (let d = 0; d < wv.dims; d++) common[d]! += w * wv.vectors[row * wv.dims + d]!
  }
  const commonNorm = Math.hypot(...common)
  if (commonNorm > 0) for (let d = 0; d < wv.dims; d++) common[d]! /= commonNorm
  const weights = new Float64Array(wv.count)
  for (let row = 0; row < wv.count; row++) weights[row] = A / (A + probability(wv.ranks[row]!))

  return (input: string): Float32Array => {
    const text = input
    const semantic = new Float64Array(wv.dims)
    const lexical = new Float64Array(HASH_DIMS)
    const feature = (key: string, weight: number) => {
      const h = hash(key)
      lexical[(h >>> 1) % HASH_DIMS]! += h & 1 ? weight : -weight
    }
    referenceTokenize(
      text,
      (word) => {
        const row = wv.index.get(word)
        if (row !== undefined) {
          const w = weights[row]! * wv.scales[row]!
          for (let d = 0; d < wv.dims; d++) semantic[d]! += w * wv.vectors[row * wv.dims + d]!
          feature(word, KNOWN_WORD_LEXICAL * weights[row]!)
          return
        }
        feature(word, 1)
        if (word.length < 4 || /^\p{N}+$/u.test(word)) return
        const marked = `<${word}>`
        const grams = marked.length - 2 + (marked.length - 3)
        for (let n = 3; n <= 4; n++) {
          for (let i = 0; i + n <= marked.length; i++) feature(`#${marked.slice(i, i + n)}`, 1 / Math.sqrt(grams))
        }
      },
      (identifier) => feature(identifier, 1)
    )
    let dot = 0
    for (let d = 0; d < wv.dims; d++) dot += semantic[d]! * common[d]!
    for (let d = 0; d < wv.dims; d++) semantic[d]! -= dot * common[d]!
    const sNorm = Math.hypot(...semantic)
    const lNorm = Math.hypot(...lexical)
    const sWeight = sNorm === 0 ? 0 : (lNorm === 0 ? 1 : SEMANTIC) / sNorm
    const lWeight = lNorm === 0 ? 0 : (sNorm === 0 ? 1 : LEXICAL) / lNorm
    const out = new Float32Array(wv.dims + HASH_DIMS)
    for (let d = 0; d < wv.dims; d++) out[d] = semantic[d]! * sWeight
    for (let d = 0; d < HASH_DIMS; d++) out[wv.dims + d] = lexical[d]! * lWeight
    return out
  }
}

const referenceVectorText = (v: ArrayLike<number>) => `[${Array.from(v, (x) => Math.round(x * 1e7) / 1e7).join(",")}]`

// ------------------------------------------------------------------------------------------------ generators

/** Pieces of agent-span text: identifiers in every casing, common words, separators and awkward Unicode. */
const PIECES = [
  "get",
  "User",
  "By",
  "Id",
  "getUserById",
  "ETIMEDOUT",
  "ETIMEDOUT_ERR",
  "HTTPServer2xx",
  "HTTP",
  "Server",
  "2xx",
  "429",
  "_",
  "__",
  "ERR",
  "payment_intent.failed",
  "stripeChargeFailed",
  "XMLHttpRequest",
  "aB",
  "Ab",
  "AB",
  "a1B2",
  "timeout",
  "timed",
  "out",
  "Authorization",
  "permissions",
  "PERMISSION",
  "invoices",
  "Invoice_ID",
  "frustrated",
  "card",
  "declined",
  "the",
  "a",
  "of",
  "to",
  "and",
  "book",
  "flight",
  "Lisbon",
  "hotel",
  "x",
  "zqxv",
  "qwertyuiopasdfghjk",
  " ",
  "  ",
  "\n",
  "\t",
  ".",
  ",",
  "-",
  ":",
  "/",
  "'",
  '"',
  "{",
  "}",
  "[",
  "]",
  "…",
  "—",
  "’",
  "é",
  "É",
  "café",
  "naïve",
  "ß",
  "İ",
  "ǅ",
  "ǅemal",
  "Ǉ",
  "Σ",
  "ΑΒΓδ",
  "日本語",
  "テキスト",
  "\u0301",
  "e\u0301",
  "😀",
  "\ud83d",
  "\ude00",
  "Ⅻ",
  "١٢٣",
  "ª",
  "º",
  "µ",
  "ﬁ",
  "Ⓐ",
  "ʰ",
  "ǈa",
  "\u00a0",
  "\u2028",
  "\u200b",
  "０１２",
  "ＡＢＣ"
]
const piece = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...PIECES) },
  { weight: 1, arbitrary: fc.fullUnicodeString({ maxLength: 6 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 8 }) },
  { weight: 1, arbitrary: fc.stringOf(fc.constantFrom("a", "B", "c", "D", "1", "_"), { maxLength: 12 }) }
)
const text = fc.array(piece, { maxLength: 40 }).map((pieces) => pieces.join(""))
const anyText = fc.oneof(text, fc.fullUnicodeString({ maxLength: 80 }), fc.string({ maxLength: 80 }))

const words = (tok: typeof tokenize, s: string) => {
  const out: Array<string> = []
  tok(
    s,
    (p) => out.push(`p:${p}`),
    (i) => out.push(`i:${i}`)
  )
  return out
}

// ------------------------------------------------------------------------------------------------ tests

describe("tokenizer", () => {
  test("the examples", () => {
    expect(words(tokenize, "getUserById ETIMEDOUT_ERR HTTPServer2xx")).toEqual([
      "p:get",
      "p:user",
      "p:by",
      "p:id",
      "i:getuserbyid",
      "p:etimedout",
      "p:err",
      "i:etimedout_err",
      "p:http",
      "p:server",
      "p:2",
      "p:xx",
      "i:httpserver2xx"
    ])
    expect(words(tokenize, "Ünïcode_ǅemal café…ETIMEDOUT")).toEqual(
      words(referenceTokenize, "Ünïcode_ǅemal café…ETIMEDOUT")
    )
  })

  test("gives the same parts and identifiers as the regular expressions, on any text", () => {
    fc.assert(
      fc.property(anyText, (s) => {
        expect(words(tokenize, s)).toEqual(words(referenceTokenize, s))
      }),
      { numRuns: 5000 }
    )
  })

  test("chunks end at ASCII chars only and cover every word char", () => {
    fc.assert(
      fc.property(anyText, (s) => {
        const chunks: Array<string> = []
        forEachChunk(s, (chunk, ascii) => {
          chunks.push(chunk)
          expect(ascii).toBe(/^[A-Za-z0-9_]+$/.test(chunk))
        })
        expect(chunks.join("")).toBe(s.replace(/[\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]/g, ""))
      }),
      { numRuns: 2000 }
    )
  })
})

describe("chunk memo", () => {
  test("gives compute's value for each chunk, in order, across generations; long chunks are not kept", () => {
    let computed = 0
    const compute = (chunk: string, ascii: boolean) => {
      computed++
      return `${chunk}:${ascii}`
    }
    const memo = chunkMemo(3, 5, compute)
    fc.assert(
      fc.property(anyText, (s) => {
        const expected: Array<string> = []
        forEachChunk(s, (chunk, ascii) => expected.push(`${chunk}:${ascii}`))
        const got: Array<string> = []
        memo(s, (v) => got.push(v))
        expect(got).toEqual(expected)
      }),
      { numRuns: 3000 }
    )
    computed = 0
    memo("a b c a b c a", () => {})
    expect(computed).toBeLessThanOrEqual(3)
    computed = 0
    memo("longer_than_five longer_than_five", () => {})
    expect(computed).toBe(2)
  })
})

describe("memo keys", () => {
  test("do not keep the texts they were cut from alive", () => {
    // Bun makes a slice of 13+ chars a view of its parent: 3,000 remembered 36-char chunks, each cut from its own
    // 110 kB text, would hold 330 MB.
    const memo = chunkMemo(16_384, 48, (chunk) => chunk.length)
    // Measured on the heap after a full collection: the process's resident size also holds whatever the allocator
    // kept from earlier test files, which made it flaky.
    Bun.gc(true)
    const before = process.memoryUsage().heapUsed
    for (let i = 0; i < 3000; i++) memo(`w${i}x${"abcdefghij".repeat(3)}zz ${"abcdefghij ".repeat(10_000)}`, () => {})
    Bun.gc(true)
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(150e6)
  })
})

describe("vector text", () => {
  test("vectorLiteral is the rounded components joined, on any float32 vector and every 7-decimal value", () => {
    fc.assert(
      fc.property(fc.float32Array({ maxLength: 300 }), (v) => {
        expect(vectorLiteral(v, "[", "]")).toBe(referenceVectorText(v))
      }),
      { numRuns: 3000 }
    )
    const unit = fc.float({ min: -1, max: 1, noNaN: true })
    fc.assert(
      fc.property(fc.array(unit, { maxLength: 256 }), (xs) => {
        const v = Float32Array.from(xs)
        expect(vectorLiteral(v, "{", "}")).toBe(`{${referenceVectorText(v).slice(1, -1)}}`)
      }),
      { numRuns: 3000 }
    )
    // Every rounding result around the exponent-notation and integer boundaries, and a sweep of the rest.
    const ks: Array<number> = []
    for (let k = -200; k <= 200; k++) ks.push(k)
    for (let k = 9_999_800; k <= 10_000_200; k++) ks.push(k, -k)
    for (let k = 0; k <= 10_000_000; k += 997) ks.push(k, -k)
    const v = Float64Array.from(ks, (k) => k / 1e7)
    expect(vectorLiteral(v, "[", "]")).toBe(referenceVectorText(v))
    const odd = [NaN, Infinity, -Infinity, -0, 0.5e-7, -0.5e-7, 0.49999e-7, 1.5, -123.45678901, 1e21, 1e-300]
    expect(vectorLiteral(odd, "[", "]")).toBe(referenceVectorText(odd))
  })
})

describe("offline embedding", () => {
  let fast: (text: string) => Float32Array
  let reference: (text: string) => Float32Array
  beforeAll(async () => {
    const wv = await loadWordVectors("memory://")
    fast = makeOfflineEmbedding(wv)
    reference = referenceEmbedding(wv)
  }, 120_000)

  const same = (s: string) => {
    const a = fast(s)
    const b = reference(s)
    expect(a.length).toBe(b.length)
    for (let d = 0; d < a.length; d++) {
      if (!Object.is(a[d], b[d])) throw new Error(`dimension ${d} differs for ${JSON.stringify(s)}: ${a[d]} vs ${b[d]}`)
    }
  }

  test("is the reference embedding, bit for bit, on any text (computed, then remembered)", () => {
    same("")
    same("The card was declined by the bank")
    same("request to the inventory service timed out after 30 seconds; ETIMEDOUT upstream, gave up")
    fc.assert(
      fc.property(anyText, (s) => {
        same(s)
        same(s)
      }),
      { numRuns: 1500 }
    )
  })

  test("is the reference embedding on span-sized texts", () => {
    const vocabulary = PIECES.concat(
      "retry",
      "after",
      "seconds",
      "model",
      "call",
      "tool",
      "result",
      "error",
      "gpt-4o-mini"
    )
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...vocabulary), { minLength: 100, maxLength: 800 }), (ws) => {
        same(ws.join(" "))
      }),
      { numRuns: 100 }
    )
  })
})
