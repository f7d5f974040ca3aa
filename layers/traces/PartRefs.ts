/**
 * A span's references to shared parts as stored (`spans.input_refs` / `output_refs`, migration 0047_refs_delta_text):
 * the first id, then each later id as its difference from the one before, in decimal, comma-separated ("5123456,1,1,-40,2";
 * "" for no id). A trace's write numbers its parts in the order it first meets them, so a span's ids are mostly
 * ascending and close: two or three bytes an id instead of eight, and no array header. The same coding in SQL:
 * `tapedeck_refs(text) RETURNS bigint[]` and `tapedeck_refs_text(bigint[]) RETURNS text`.
 *
 * Ids are decimal strings here (as both drivers return a bigint as text). Arithmetic is on numbers while every id and
 * difference is a safe integer, on bigints otherwise (ids are a sequence's, up to 2^63 - 1).
 */

/** The ids of a stored reference list, in order. */
export const decodeRefs = (text: string): Array<string> => {
  if (text === "") return []
  const tokens = text.split(",")
  const ids = new Array<string>(tokens.length)
  let id = 0
  for (let i = 0; i < tokens.length; i++) {
    const d = Number(tokens[i])
    id += d
    if (!Number.isSafeInteger(d) || !Number.isSafeInteger(id)) return decodeBig(tokens)
    ids[i] = String(id)
  }
  return ids
}

const decodeBig = (tokens: ReadonlyArray<string>): Array<string> => {
  let id = 0n
  return tokens.map((t) => {
    id += BigInt(t)
    return id.toString()
  })
}

/** The stored form of a list of ids (decimal strings, numbers or bigints), in order. */
export const encodeRefs = (ids: ReadonlyArray<string | number | bigint>): string => {
  let text = ""
  let previous = 0
  for (let i = 0; i < ids.length; i++) {
    const id = Number(ids[i])
    if (!Number.isSafeInteger(id) || !Number.isSafeInteger(id - previous)) return encodeBig(ids)
    text += i === 0 ? String(id) : `,${id - previous}`
    previous = id
  }
  return text
}

const encodeBig = (ids: ReadonlyArray<string | number | bigint>): string => {
  let previous = 0n
  return ids
    .map((raw) => {
      const id = BigInt(raw)
      const d = id - previous
      previous = id
      return d.toString()
    })
    .join(",")
}
