/**
 * Shared parts stored compressed (migration 0043_packed_parts): `span_contents.packed` holds a format byte and the
 * part's UTF-8 text as raw deflate, beside `body` (exactly one of the two is set). PostgreSQL compresses a row only
 * above ~2 kB and most parts are 0.3–2 kB, so without this they were stored as they came. The parts' hashes stay
 * those of their text: a part is the same part (deduplicated, sent by hash only) however it is stored.
 *
 * Deflate starts from a preset dictionary of the JSON of chat messages (keys, roles, the usual openings of OpenAI
 * and Anthropic message and tool-call objects), which a short part would otherwise spell out once in full: on the
 * storage benchmark's parts it takes the ratio from 2.76 to 3.0, and that of the parts under 600 bytes from 1.69 to
 * 2.11 (docs/performance.md). The dictionary is part of the format: a new one needs a new format byte.
 */
import { deflateRawSync, inflateRawSync } from "node:zlib"

/** The format byte of raw deflate with DICTIONARY_1 as its preset dictionary. */
const DEFLATE_DICTIONARY_1 = 1

const DICTIONARY_1 = Buffer.from(
  `"role":"user","content":"role":"assistant","content":"tool_calls":[{"id":"call_","type":"function","function":{"name":"arguments":"{\\"role":"tool","tool_call_id":"role":"system","content":[{"type":"text","text":"type":"tool_use","input":"type":"tool_result","tool_use_id":"`,
  "utf8"
)

/**
 * Parts are short: a 4 kB window and a smaller hash table cost less to set up per part than zlib's defaults (32 kB,
 * memLevel 8) and lose nothing on texts of that size. The window is part of the format too (inflate sets up a window
 * of the same size).
 */
const DEFLATE = { windowBits: 12, memLevel: 6, dictionary: DICTIONARY_1 } as const
const INFLATE = { windowBits: 12, dictionary: DICTIONARY_1 } as const

/**
 * A part is stored compressed only when that saves at least this share of its bytes (and MIN_SAVED bytes): text and
 * JSON save 50–70 %, random-like data (ids, base64, random printable text: 12–24 %) is left plain, not worth inflating
 * at every read.
 */
const MIN_SAVED_SHARE = 0.25
const MIN_SAVED = 16

/** The part's text compressed as stored in `span_contents.packed`; undefined when storing it plain is about as small. */
export const packPart = (text: string): Buffer | undefined => {
  const bytes = Buffer.from(text, "utf8")
  const deflated = deflateRawSync(bytes, DEFLATE)
  const size = deflated.length + 1
  if (bytes.length - size < Math.max(MIN_SAVED, bytes.length * MIN_SAVED_SHARE)) return undefined
  const packed = Buffer.allocUnsafe(size)
  packed[0] = DEFLATE_DICTIONARY_1
  deflated.copy(packed, 1)
  return packed
}

/** A part's text from `span_contents.packed` (a Buffer from node-postgres, a Uint8Array from PGlite). */
export const unpackPart = (packed: Uint8Array): string => {
  if (packed[0] !== DEFLATE_DICTIONARY_1) throw new Error(`shared span content in an unknown format (${packed[0]})`)
  return inflateRawSync(packed.subarray(1), INFLATE).toString("utf8")
}

/** A part's text as stored: plain (`body`) or compressed (`packed`). */
export const partText = (body: string | null, packed: Uint8Array | null): string => {
  if (body !== null) return body
  if (packed === null) throw new Error("shared span content with neither text nor packed bytes")
  return unpackPart(packed)
}

/**
 * Marks a part sent compressed inside a `*_parts` text array (migration 0045_packed_parts_sent): \x02 then the packed
 * bytes in base64. A part's text is JSON text, which never holds a raw control character, so the mark cannot be the
 * start of a plain part. `tapedeck_share_parts` stores such a part as `packed`; the writer gives the hashes (those of
 * the text), as every writer that splits payloads does.
 */
export const PACKED_MARK = "\x02"

/** The part as a writer of `*_parts` arrays sends it: compressed when that pays (`packPart`), plain otherwise. */
export const sentPart = (text: string): string => {
  const packed = packPart(text)
  return packed === undefined ? text : PACKED_MARK + packed.toString("base64")
}

/** `sentPart` of each text sent (null: sent by hash only). */
export const sentParts = (parts: ReadonlyArray<string | null>): Array<string | null> =>
  parts.map((p) => (p === null ? null : sentPart(p)))

/** Skeletons shorter than this are stored as they are: deflate and base64 would not make them smaller. */
const SKELETON_MIN_BYTES = 96

/**
 * A span's skeleton as stored in `spans.input_skel` / `output_skel`: packed (PACKED_MARK and the packed bytes in
 * base64) when that is smaller, as it is as they are. A skeleton is JSON text with \x01 where each part goes, so it
 * never starts with the mark; a model call's skeleton holds the small remainders of every earlier message of its
 * conversation (their roles and tool-call ids), which deflate takes to a fifth or less. Reads take either
 * (`skeletonText`), so skeletons stored before, or by the split trigger in SQL, stay as they are.
 */
export const packSkeleton = (skel: string): string => {
  const bytes = Buffer.byteLength(skel)
  if (bytes < SKELETON_MIN_BYTES) return skel
  const packed = packPart(skel)
  if (packed === undefined) return skel
  const marked = PACKED_MARK + packed.toString("base64")
  return marked.length < bytes ? marked : skel
}

/** A skeleton's text as stored: plain or packed (`packSkeleton`). */
export const skeletonText = (stored: string): string =>
  stored.startsWith(PACKED_MARK) ? unpackPart(Buffer.from(stored.slice(1), "base64")) : stored
