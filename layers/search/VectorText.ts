/**
 * The SQL text of a vector: its components rounded to 7 decimals, comma-separated, between `open` and `close`
 * ("[…]" for pgvector, "{…}" for real[]). The same string as
 * `open + Array.from(v, (x) => Math.round(x * 1e7) / 1e7).join(",") + close`, written digit by digit into a
 * byte buffer instead of formatting 256 doubles (test/layers/offline-embedder.test.ts compares the two).
 *
 * Why the digits are those of `String(k / 1e7)` for an integer k with |k| ≤ 1e7: k·10⁻⁷ has at most 8
 * significant digits, so it is the shortest decimal that reads back as the double k / 1e7, which is what
 * `String` prints: "0" for 0, "d.ddddddd" without trailing zeros, and exponent notation below 1e-6
 * ("3e-7" for k = 3). Anything else (|x| > 1, NaN, infinities) is formatted by `String` itself.
 */
let buffer = new Uint8Array(4096)
const decoder = new TextDecoder()

const ZERO = 48
const MINUS = 45
const DOT = 46

export const vectorLiteral = (v: ArrayLike<number>, open: string, close: string): string => {
  // At most 11 bytes a component on the fast path ("-0.1234567,"); a slow one is measured when written.
  if (buffer.length < v.length * 12 + 16) buffer = new Uint8Array(v.length * 24 + 16)
  let at = 0
  for (let i = 0; i < v.length; i++) {
    if (i > 0) buffer[at++] = 44 // ","
    const k = Math.round(v[i]! * 1e7)
    if (k === 0) {
      buffer[at++] = ZERO
      continue
    }
    if (!(k >= -1e7 && k <= 1e7)) {
      const s = String(k / 1e7)
      if (buffer.length < at + s.length + v.length * 12 + 16) {
        const larger = new Uint8Array((at + s.length + v.length * 12 + 16) * 2)
        larger.set(buffer.subarray(0, at))
        buffer = larger
      }
      for (let c = 0; c < s.length; c++) buffer[at++] = s.charCodeAt(c)
      continue
    }
    // An integer of at most 8 digits from here on: int32 arithmetic.
    let n = k | 0
    if (n < 0) {
      buffer[at++] = MINUS
      n = -n
    }
    if (n === 10_000_000) {
      buffer[at++] = ZERO + 1
    } else if (n < 10) {
      buffer[at++] = ZERO + n
      buffer[at++] = 101 // "e"
      buffer[at++] = MINUS
      buffer[at++] = ZERO + 7
    } else {
      buffer[at++] = ZERO
      buffer[at++] = DOT
      let width = 7
      let q = (n / 10) | 0
      while (n === q * 10) {
        n = q
        q = (n / 10) | 0
        width--
      }
      for (let p = at + width - 1; p >= at; p--) {
        q = (n / 10) | 0
        buffer[p] = ZERO + n - q * 10
        n = q
      }
      at += width
    }
  }
  return open + decoder.decode(buffer.subarray(0, at)) + close
}

/**
 * The vector's sign bits as SQL bit-string text: '1' where the component, rounded as `vectorLiteral` writes it,
 * is positive (migration 0026 computes the same from the stored components).
 */
export const signBits = (v: ArrayLike<number>): string => {
  let bits = ""
  for (let i = 0; i < v.length; i++) bits += Math.round(v[i]! * 1e7) > 0 ? "1" : "0"
  return bits
}

/** How many weight classes the query's components fall into for the prefilter's weighted Hamming distance. */
export const WEIGHT_CLASSES = 4

/**
 * The query side of the sign-bit prefilter: its sign bits, and its dimensions split into WEIGHT_CLASSES masks by
 * the magnitude of the component (quantiles of |q|), each with the mean magnitude of its class as weight. The
 * prefilter's distance to a span is the sum over classes of weight × the number of the class's bits where the signs
 * differ: a sign disagreement on a large query component costs more than one on a small one, and the query's zero
 * components (most of the sparse hashed features) cost nothing. Plain Hamming distance weighs them all alike.
 */
export const weightedSignMasks = (v: ArrayLike<number>) => {
  const bits = signBits(v)
  const order = Array.from({ length: v.length }, (_, i) => i)
    .filter((i) => Math.round(v[i]! * 1e7) !== 0)
    .sort((a, b) => Math.abs(v[a]!) - Math.abs(v[b]!))
  const classes: Array<{ mask: string; weight: number }> = []
  for (let c = 0; c < WEIGHT_CLASSES; c++) {
    const members = order.slice(
      Math.floor((c * order.length) / WEIGHT_CLASSES),
      Math.floor(((c + 1) * order.length) / WEIGHT_CLASSES)
    )
    const mask = new Array<string>(v.length).fill("0")
    let sum = 0
    for (const i of members) {
      mask[i] = "1"
      sum += Math.abs(v[i]!)
    }
    classes.push({ mask: mask.join(""), weight: members.length === 0 ? 0 : sum / members.length })
  }
  return { bits, classes }
}

/**
 * Without pgvector, a stored vector is a `bytea` of one byte a component (migration 0044): each component of the
 * vector times 127 / its largest magnitude, rounded half away from zero, plus 128 (so a byte reads back with
 * `get_byte(…) - 128`, −127…127). The scale is not stored: the re-rank computes the cosine between the query and
 * the stored direction, dividing by the stored vector's norm, so a per-vector factor cancels out. A component's
 * error is at most half a step, |v|max / 254; the cosine error this gives is measured and bounded in
 * test/layers/search/footprint.test.ts (docs/search.md, "Index").
 */
export const INT8_STEPS = 127

/** The vector's bytes as the column stores them (a zero vector stores 128s, the zero direction). */
export const int8Bytes = (v: ArrayLike<number>): Uint8Array => {
  let max = 0
  for (let i = 0; i < v.length; i++) max = Math.max(max, Math.abs(v[i]!))
  const out = new Uint8Array(v.length)
  const scale = max > 0 ? INT8_STEPS / max : 0
  for (let i = 0; i < v.length; i++) {
    const x = v[i]! * scale
    // Half away from zero, as PostgreSQL's round(numeric) does in migration 0044.
    const k = x < 0 ? -Math.round(-x) : Math.round(x)
    out[i] = 128 + Math.max(-INT8_STEPS, Math.min(INT8_STEPS, k))
  }
  return out
}

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"))

/** The stored bytes as hex (no prefix): `decode(…, 'hex')` in SQL. */
export const int8Hex = (bytes: Uint8Array): string => {
  let s = ""
  for (let i = 0; i < bytes.length; i++) s += HEX[bytes[i]!]
  return s
}

/** The sign bits of the stored bytes: '1' where the stored component is positive. */
export const int8SignBits = (bytes: Uint8Array): string => {
  let bits = ""
  for (let i = 0; i < bytes.length; i++) bits += bytes[i]! > 128 ? "1" : "0"
  return bits
}

/**
 * The distance the re-rank orders by without pgvector: 1 − the cosine between `query` and the stored direction, as
 * the SQL over `get_byte(…) - 128` computes it (the dot product over the stored vector's norm, in double precision,
 * component by component in order; 0 cosine for a zero vector). `query` holds the components as the statement's
 * `real[]` has them (`reals`).
 */
export const int8Distance = (bytes: ArrayLike<number>, query: ArrayLike<number>): number => {
  let dot = 0
  let norm = 0
  for (let i = 0; i < query.length; i++) {
    const b = (bytes[i] ?? 128) - 128
    dot += b * query[i]!
    norm += b * b
  }
  return norm === 0 ? 1 : 1 - dot / Math.sqrt(norm)
}

/** The components of an SQL array literal (`vectorLiteral`) as PostgreSQL's `real[]` holds them (single precision). */
export const reals = (literal: string): Float32Array => {
  const body = literal.slice(1, -1)
  return Float32Array.from(body === "" ? [] : body.split(","), Number)
}
