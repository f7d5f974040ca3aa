/**
 * The words of a text, as the offline embedder sees them: runs of letters, digits and "_"
 * (Unicode-aware), split at underscores and case changes. Text is mostly ASCII, so it is scanned char by char:
 * a run of ASCII letters, digits and "_" is split by hand; a run that holds any non-ASCII char goes through the
 * Unicode regular expressions (`RAW`, `PART`), which define the result. Both paths give the same words (see
 * test/layers/offline-embedder.test.ts, which checks them against the regular expressions alone).
 */

const RAW = /[\p{L}\p{N}_]+/gu
const PART = /\p{Lu}+(?!\p{Ll})|\p{Lu}?\p{Ll}+|\p{N}+|\p{L}+/gu

const OTHER = 0
const LOWER = 1
const UPPER = 2
const DIGIT = 3
const UNDERSCORE = 4

/** The class of each ASCII char (OTHER for anything that ends a word). */
const CLASS = new Uint8Array(128)
for (let c = 0; c < 128; c++) {
  CLASS[c] =
    c >= 97 && c <= 122
      ? LOWER
      : c >= 65 && c <= 90
        ? UPPER
        : c >= 48 && c <= 57
          ? DIGIT
          : c === 95
            ? UNDERSCORE
            : OTHER
}

/**
 * Calls `onChunk` with each maximal run of chars that may belong to a word: ASCII letters, digits and "_", and
 * any non-ASCII char. A run is ASCII (`ascii` true) or not; an ASCII run is exactly one word token. Runs end at
 * ASCII chars only, so surrogate pairs stay whole and the regular expressions see each run as they would the text.
 */
export const forEachChunk = (text: string, onChunk: (chunk: string, ascii: boolean) => void): void => {
  const n = text.length
  let i = 0
  while (i < n) {
    let c = text.charCodeAt(i)
    if (c < 128 && CLASS[c] === OTHER) {
      i++
      continue
    }
    const start = i
    let ascii = true
    for (;;) {
      if (c >= 128) ascii = false
      if (++i >= n) break
      c = text.charCodeAt(i)
      if (c < 128 && CLASS[c] === OTHER) break
    }
    onChunk(text.slice(start, i), ascii)
  }
}

/**
 * The words of one chunk from `forEachChunk`, lowercased: `onPart` for each part of each token ("getUserById" →
 * get, user, by, id; "ETIMEDOUT_ERR" → etimedout, err; "HTTPServer2xx" → http, server, 2, xx), and
 * `onIdentifier` with the whole token when it has more than one part.
 */
export const chunkWords = (
  chunk: string,
  ascii: boolean,
  onPart: (word: string) => void,
  onIdentifier: (identifier: string) => void
): void => {
  if (!ascii) {
    for (const raw of chunk.matchAll(RAW)) {
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
    return
  }
  // ASCII lowercasing keeps every index, so the parts are cut from the lowercased token.
  const lower = chunk.toLowerCase()
  const n = chunk.length
  let parts = 0
  let i = 0
  while (i < n) {
    const c = CLASS[chunk.charCodeAt(i)]
    if (c === UNDERSCORE) {
      i++
      continue
    }
    let j = i + 1
    if (c === UPPER) {
      while (j < n && CLASS[chunk.charCodeAt(j)] === UPPER) j++
      if (j < n && CLASS[chunk.charCodeAt(j)] === LOWER) {
        if (j - i > 1) {
          // "HTTPServer": the capitals but the last ("HTTP"); the last one starts the next part ("Server").
          j--
        } else {
          while (j < n && CLASS[chunk.charCodeAt(j)] === LOWER) j++
        }
      }
    } else {
      // A lowercase run or a digit run.
      while (j < n && CLASS[chunk.charCodeAt(j)] === c) j++
    }
    onPart(lower.slice(i, j))
    parts++
    i = j
  }
  if (parts > 1) onIdentifier(lower)
}

/**
 * Words of a text, lowercased: identifiers are split at underscores and case changes ("getUserById" → get,
 * user, by, id; "ETIMEDOUT_ERR" → etimedout, err), and the whole identifier is kept as a lexical feature.
 */
export const tokenize = (text: string, onPart: (word: string) => void, onIdentifier: (identifier: string) => void) =>
  forEachChunk(text, (chunk, ascii) => chunkWords(chunk, ascii, onPart, onIdentifier))

/**
 * A copy of a string that shares no memory with the string it was cut from. Bun (JavaScriptCore) makes a slice
 * of 13 chars or more a view into its parent (measured with Bun 1.4: shorter ones are copied), so a kept slice
 * would keep the whole span text alive. Reading a char flattens the concatenation into one buffer.
 */
const detach = (s: string) => {
  if (s.length < 8) return s
  let copy = ""
  for (let i = 0; i < s.length; i++) copy += s[i]!
  copy.charCodeAt(0)
  return copy
}

const FNV_OFFSET = 0x811c9dc5 | 0
const FNV_PRIME = 0x01000193

/** An open-addressing table from chunk to value, looked up by a chunk's place in a text (no slice to make). */
class Table<A> {
  readonly mask: number
  readonly hashes: Int32Array
  readonly keys: Array<string | undefined>
  readonly values: Array<A | undefined>
  size = 0
  constructor(entries: number) {
    let slots = 16
    while (slots < entries * 2) slots *= 2
    this.mask = slots - 1
    this.hashes = new Int32Array(slots)
    this.keys = new Array<string | undefined>(slots).fill(undefined)
    this.values = new Array<A | undefined>(slots).fill(undefined)
  }
  find(text: string, start: number, length: number, hash: number): A | undefined {
    for (let i = hash & this.mask; ; i = (i + 1) & this.mask) {
      const key = this.keys[i]
      if (key === undefined) return undefined
      if (this.hashes[i] === hash && key.length === length) {
        let j = 0
        while (j < length && key.charCodeAt(j) === text.charCodeAt(start + j)) j++
        if (j === length) return this.values[i]
      }
    }
  }
  insert(key: string, hash: number, value: A) {
    let i = hash & this.mask
    while (this.keys[i] !== undefined) i = (i + 1) & this.mask
    this.hashes[i] = hash
    this.keys[i] = key
    this.values[i] = value
    this.size++
  }
  clear() {
    this.keys.fill(undefined)
    this.values.fill(undefined)
    this.size = 0
  }
}

/**
 * `forEachChunk` with a bounded memo of a per-chunk result: calls `onValue` with `compute(chunk, ascii)` for each
 * chunk of a text, in order, computing it only for chunks not seen lately. A chunk is hashed while it is scanned
 * and found in place, so a remembered one costs no allocation. Two generations of at most `size` chunks each: a
 * hit in the older one moves to the newer one, and the older one is dropped when the newer one fills up (a cheap
 * approximation of LRU). Chunks longer than `maxKey` (ids, hashes, base64) are computed every time and not kept.
 * Kept keys are copies (see `detach`). `compute` must be a pure function of the chunk.
 */
export const chunkMemo = <A>(size: number, maxKey: number, compute: (chunk: string, ascii: boolean) => A) => {
  let current = new Table<A>(size)
  let previous = new Table<A>(size)
  return (text: string, onValue: (value: A) => void): void => {
    const n = text.length
    let i = 0
    while (i < n) {
      let c = text.charCodeAt(i)
      if (c < 128 && CLASS[c] === OTHER) {
        i++
        continue
      }
      const start = i
      let ascii = true
      let hash = FNV_OFFSET
      for (;;) {
        if (c >= 128) ascii = false
        hash = Math.imul(hash ^ c, FNV_PRIME)
        if (++i >= n) break
        c = text.charCodeAt(i)
        if (c < 128 && CLASS[c] === OTHER) break
      }
      const length = i - start
      if (length > maxKey) {
        onValue(compute(text.slice(start, i), ascii))
        continue
      }
      let value = current.find(text, start, length, hash)
      if (value === undefined) {
        const chunk = text.slice(start, i)
        value = previous.find(text, start, length, hash)
        if (value === undefined) value = compute(chunk, ascii)
        if (current.size >= size) {
          const emptied = previous
          emptied.clear()
          previous = current
          current = emptied
        }
        current.insert(detach(chunk), hash, value)
      }
      onValue(value)
    }
  }
}
