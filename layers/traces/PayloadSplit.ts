/**
 * The split of a large span payload into a skeleton and shared parts, as the trigger of migration
 * 0030_shared_span_content does it in SQL with 0041_shared_message_leaves's `tapedeck_cut` (that one is the fallback
 * for rows written whole). Done here on the write
 * paths that build their rows in TypeScript: the parts are JSON.stringify's text of sub-values, which is also the
 * text PostgreSQL's own split finds inside JSON.stringify's text of the whole, so both ways share the same parts. Sizes
 * are counted in UTF-8 bytes, as the trigger counts them (`octet_length`), so non-ASCII text is cut alike too.
 */
import { sha256Hex } from "../platform/Hashes.ts"

/** Sub-values whose JSON text has at least this many UTF-8 bytes are shared parts (the trigger's `octet_length`). */
export const CUT_BYTES = 256
/** Payloads whose JSON text has fewer UTF-8 bytes than this stay whole. */
export const SHARE_BYTES = 1024
const MAX_DEPTH = 8
/** Stands for a part in a skeleton: a raw \x01 never occurs in JSON text (JSON.stringify escapes it). */
const HOLE = "\x01"

export interface SplitPayload {
  readonly skel: string
  /** Each part's JSON text; null for those the writer knows are stored (sent by hash only). */
  readonly parts: ReadonlyArray<string | null>
  /** The SHA-256 of each part's UTF-8 text, hex: computed here, off the database's CPU. */
  readonly hashes: ReadonlyArray<string>
}

/** How an object element of an array was cut: its piece of the skeleton and its parts, at a depth. */
interface CutElement {
  readonly depth: number
  readonly piece: string
  readonly parts: ReadonlyArray<string>
}

/**
 * How the messages of a request were cut: by their text, and, for a frozen one (a value the OTLP mapping shares between
 * the spans of an export, ExportMemo), by the object itself, which spares serializing it again in every later span.
 */
interface CutMemo {
  readonly byText: Map<string, CutElement>
  readonly byObject: WeakMap<object, CutElement>
}

/** A part's hash; a per-request one also remembers how each message was cut (`partHasher`). */
export type PartHasher = ((text: string) => string) & {
  readonly elements?: CutMemo
  /** Whether this text was hashed (by a per-request hasher: whether it is a part of the request). */
  readonly has?: (text: string) => boolean
}

/**
 * A part's hash, each distinct text hashed once per use of the returned function. A request's spans repeat their
 * history (a model call carries every earlier message), so one per request spares SHA-256 of the same text in every
 * later span (it was most of the split's cost on the 30-step agent: docs/performance.md), and its memo of how each
 * message was cut spares cutting it again (a message's values stringified again, in every later model call).
 */
export const partHasher = (): PartHasher => {
  const memo = new Map<string, string>()
  const hash = (text: string) => {
    let h = memo.get(text)
    if (h === undefined) {
      h = sha256Hex(text)
      memo.set(text, h)
    }
    return h
  }
  const elements: CutMemo = { byText: new Map(), byObject: new WeakMap() }
  return Object.assign(hash, { elements, has: (text: string) => memo.has(text) })
}

/**
 * Whether JSON text has fewer than `limit` UTF-8 bytes, as the trigger counts (`octet_length`): a text of characters
 * is never shorter in bytes, and at most three times longer, so most texts are told apart by their length alone.
 */
const under = (text: string, limit: number) =>
  text.length < limit && (text.length * 3 < limit || Buffer.byteLength(text) < limit)

/**
 * An array or object whose JSON text is its elements' or entries' (no `toJSON`), so that it can be cut into them; any
 * other value is cut whole, as its JSON text.
 */
const isPlainObject = (value: unknown): value is object =>
  typeof value === "object" && value !== null && typeof (value as { toJSON?: unknown }).toJSON !== "function"

/**
 * Whether an element or entry at `depth` is an array or object that `cut` cuts into its own elements, told without
 * serializing it: its JSON text surely has at least CUT_BYTES bytes. (Its text is then not needed: a model call's
 * messages array, a large tool schema, would otherwise be serialized whole before being cut, at every level.)
 */
const surelyCut = (item: unknown, depth: number) =>
  depth + 1 < MAX_DEPTH && isPlainObject(item) && jsonLengthFloor(item, CUT_BYTES) >= CUT_BYTES

const cut = (value: unknown, text: string, depth: number, parts: Array<string>, memo: CutMemo | undefined): string => {
  if (Array.isArray(value) && depth < MAX_DEPTH && isPlainObject(value)) {
    let skel = "["
    for (let i = 0; i < value.length; i++) {
      if (i > 0) skel += ","
      const item = value[i]
      if (surelyCut(item, depth)) {
        skel += Array.isArray(item) ? cut(item, "", depth + 1, parts, memo) : cutMessage(item, depth + 1, parts, memo)
        continue
      }
      const t = JSON.stringify(item) ?? "null"
      if (under(t, CUT_BYTES)) skel += t
      else if (isPlainObject(item))
        skel += Array.isArray(item) ? cut(item, t, depth + 1, parts, memo) : cutElement(item, t, depth + 1, parts, memo)
      else {
        parts.push(t)
        skel += HOLE
      }
    }
    return `${skel}]`
  }
  if (isPlainObject(value) && depth < MAX_DEPTH) {
    let skel = "{"
    let first = true
    for (const [key, item] of Object.entries(value)) {
      if (surelyCut(item, depth)) {
        skel += `${first ? "" : ","}${JSON.stringify(key)}:${cut(item, "", depth + 1, parts, memo)}`
        first = false
        continue
      }
      const t = JSON.stringify(item)
      if (t === undefined) continue
      skel += `${first ? "" : ","}${JSON.stringify(key)}:`
      first = false
      if (under(t, CUT_BYTES)) skel += t
      else if (isPlainObject(item)) skel += cut(item, t, depth + 1, parts, memo)
      else {
        parts.push(t)
        skel += HOLE
      }
    }
    return `${skel}}`
  }
  if (!under(text, CUT_BYTES)) {
    parts.push(text)
    return HOLE
  }
  return text
}

/**
 * An object element of an array (a chat message) of at least CUT_BYTES: its large values cut and its small remainder
 * kept in the skeleton, so that a large string in it (a tool result) is the same part as that string elsewhere (the
 * tool span's output); cut whole when the remainder is not small (a tool schema of many small values stays one part).
 */
const cutElement = (
  item: object,
  text: string,
  depth: number,
  parts: Array<string>,
  memo: CutMemo | undefined
): string => {
  const known = memo?.byText.get(text)
  if (known !== undefined && known.depth === depth) return replayed(known, parts)
  const mark = parts.length
  let piece = cut(item, text, depth, parts, memo)
  if (!under(piece, CUT_BYTES)) {
    parts.length = mark
    parts.push(text)
    piece = HOLE
  }
  memo?.byText.set(text, { depth, piece, parts: parts.slice(mark) })
  return piece
}

/**
 * `cutElement` of an element whose text is not at hand yet (a message of a history): a frozen one cut before, at the
 * same depth, is found by identity; any other is serialized, its text being the memo's key.
 */
const cutMessage = (item: object, depth: number, parts: Array<string>, memo: CutMemo | undefined): string => {
  if (memo === undefined || !Object.isFrozen(item)) return cutElement(item, JSON.stringify(item), depth, parts, memo)
  const known = memo.byObject.get(item)
  if (known !== undefined && known.depth === depth) return replayed(known, parts)
  const mark = parts.length
  const piece = cutElement(item, JSON.stringify(item), depth, parts, memo)
  memo.byObject.set(item, { depth, piece, parts: parts.slice(mark) })
  return piece
}

/** A known element's piece, its parts added to `parts`. */
const replayed = (known: CutElement, parts: Array<string>) => {
  for (const part of known.parts) parts.push(part)
  return known.piece
}

/** A string with a character JSON.stringify escapes (or a surrogate, which it escapes when unpaired). */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/
/** A string with a character that is not printable ASCII: escaped, or of more than one UTF-8 byte. */
const NOT_PLAIN = /[^\u0020-\u007e]|["\\]/
/** More characters than JSON.stringify prints for any number ("-1.2345678901234567e-308" has 24). */
const NUMBER_CHARS = 25

/**
 * At least the UTF-8 length of `JSON.stringify(value)`, counted until it reaches `limit` (then returned as it is):
 * exact for strings with nothing to escape, an upper bound for the rest. Below `limit`, the JSON text has fewer bytes
 * than `limit`; a value it cannot bound cheaply (a string with escapes, anything with `toJSON`) counts as `limit`.
 */
export const jsonLengthBound = (value: unknown, limit: number): number => {
  switch (typeof value) {
    case "string":
      if (!NOT_PLAIN.test(value)) return value.length + 2
      return ESCAPED.test(value) ? value.length * 6 + 2 : Buffer.byteLength(value) + 2
    case "number":
      return NUMBER_CHARS
    case "boolean":
      return 5
    case "object": {
      if (value === null) return 4
      let n = 2
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length && n < limit; i++) n += jsonLengthBound(value[i], limit - n) + 1
        return n
      }
      if (typeof (value as { toJSON?: unknown }).toJSON === "function") return limit
      for (const key in value) {
        n += jsonLengthBound(key, limit - n) + jsonLengthBound((value as Record<string, unknown>)[key], limit - n) + 2
        if (n >= limit) return n
      }
      return n
    }
    default:
      // undefined prints as null in an array and nothing in an object; bigint, functions and symbols: no bound here.
      return value === undefined ? 4 : limit
  }
}

/**
 * At most the UTF-8 length of `JSON.stringify(value)`, counted until it reaches `limit`: a character of a string or key
 * is at least one byte and escapes only add; a number prints at least one character; what it cannot bound cheaply
 * (anything with `toJSON`, entries JSON leaves out) counts nothing. At or above `limit`, the JSON text is at least that
 * long.
 */
export const jsonLengthFloor = (value: unknown, limit: number): number => {
  switch (typeof value) {
    case "string":
      return value.length + 2
    case "number":
      return 1
    case "boolean":
      return 4
    case "object": {
      if (value === null) return 4
      if (typeof (value as { toJSON?: unknown }).toJSON === "function") return 0
      let n = 2
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length && n < limit; i++) n += jsonLengthFloor(value[i], limit - n) + (i > 0 ? 1 : 0)
        return n
      }
      // Own enumerable keys, as JSON.stringify takes them (for-in would count inherited ones too).
      for (const key of Object.keys(value)) {
        const item = (value as Record<string, unknown>)[key]
        // `"key":` at least; an entry JSON.stringify leaves out (undefined, a function, a symbol) counts nothing.
        if (
          typeof item === "string" ||
          typeof item === "number" ||
          typeof item === "boolean" ||
          typeof item === "object"
        )
          n += key.length + 3 + jsonLengthFloor(item, limit - n)
        if (n >= limit) return n
      }
      return n
    }
    default:
      return 0
  }
}

/**
 * The payload's skeleton and parts, or undefined when it is stored whole (small, or nothing large in it). The text
 * of a part whose hash `stored` says is stored is left out.
 */
export const splitPayload = (
  value: unknown,
  stored?: (hash: string) => boolean,
  hash: PartHasher = sha256Hex
): SplitPayload | undefined => {
  if (value === null || value === undefined || (typeof value !== "object" && typeof value !== "string"))
    return undefined
  // Most payloads are small: they are told apart without serializing them (the statement serializes them anyway).
  if (jsonLengthBound(value, SHARE_BYTES) < SHARE_BYTES) return undefined
  const parts: Array<string> = []
  if (isPlainObject(value)) {
    // An array or object is cut into its elements' texts, and its own text is their sum: not serialized whole too
    // (a model call's history is most of its payload, and every later call repeats it).
    const skel = cut(value, "", 0, parts, hash.elements)
    if (parts.length === 0 || under(skel, SHARE_BYTES - partBytes(parts) + parts.length)) return undefined
    return withHashes(skel, parts, stored, hash)
  }
  const text = JSON.stringify(value)
  if (text === undefined || under(text, SHARE_BYTES)) return undefined
  const skel = cut(value, text, 0, parts, hash.elements)
  if (parts.length === 0) return undefined
  return withHashes(skel, parts, stored, hash)
}

/**
 * The UTF-8 bytes of the parts' texts, exact below SHARE_BYTES; at or above it, a count that reached it (a part with
 * that many characters has at least that many bytes, and is not measured further).
 */
const partBytes = (parts: ReadonlyArray<string>) => {
  let n = 0
  for (let i = 0; i < parts.length && n < SHARE_BYTES; i++) {
    const part = parts[i]!
    n += part.length >= SHARE_BYTES - n ? part.length : Buffer.byteLength(part)
  }
  return n
}

const withHashes = (
  skel: string,
  parts: ReadonlyArray<string>,
  stored: ((hash: string) => boolean) | undefined,
  hash: PartHasher
): SplitPayload => {
  const hashes = parts.map(hash)
  return { skel, parts: stored === undefined ? parts : parts.map((p, i) => (stored(hashes[i]!) ? null : p)), hashes }
}
