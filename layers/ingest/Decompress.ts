import { Either } from "effect"
import { gunzipSync, inflateRawSync, inflateSync } from "node:zlib"

/** Why a body could not be decompressed: an encoding we do not speak, output over the cap, or bad data. */
export interface DecompressError {
  readonly reason: "unsupported_encoding" | "too_large" | "corrupt"
  readonly message: string
}

// node:zlib refuses maxOutputLength outside [1, 2^32].
const MAX_OUTPUT_LENGTH = 2 ** 32

/** The single content coding of a Content-Encoding header, "identity" for none; undefined for a list of several. */
const codingOf = (header: string | undefined) => {
  const codings = (header ?? "")
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity")
  return codings.length === 0 ? "identity" : codings.length === 1 ? codings[0] : undefined
}

/** A zlib stream starts with a CMF/FLG pair: deflate method 8, window ≤ 32 KiB, and a multiple of 31. */
const hasZlibHeader = (bytes: Uint8Array) =>
  bytes.length >= 2 && (bytes[0]! & 0x0f) === 8 && bytes[0]! >> 4 <= 7 && ((bytes[0]! << 8) | bytes[1]!) % 31 === 0

const tooLarge = (maxBytes: number): DecompressError => ({
  reason: "too_large",
  message: `request body exceeds the limit of ${maxBytes} bytes after decompression`
})

const inflate = (bytes: Uint8Array, coding: string, maxBytes: number): Either.Either<Uint8Array, DecompressError> => {
  // maxOutputLength makes zlib stop at the cap, so a bomb never inflates past it in memory.
  const options = { maxOutputLength: Math.min(Math.max(maxBytes, 1), MAX_OUTPUT_LENGTH) }
  try {
    const output =
      coding === "deflate"
        ? hasZlibHeader(bytes)
          ? inflateSync(bytes, options)
          : inflateRawSync(bytes, options)
        : gunzipSync(bytes, options)
    return output.byteLength > maxBytes ? Either.left(tooLarge(maxBytes)) : Either.right(output)
  } catch (error) {
    if (error instanceof RangeError) return Either.left(tooLarge(maxBytes))
    const detail = error instanceof Error ? error.message : String(error)
    return Either.left({ reason: "corrupt", message: `request body is not valid ${coding} data: ${detail}` })
  }
}

/**
 * The body as sent before its Content-Encoding: identity (or no header), gzip / x-gzip, or deflate (zlib-wrapped
 * or raw). Output over `maxBytes` is refused as `too_large` without inflating it whole.
 */
export const decompress = (
  bytes: Uint8Array,
  contentEncoding: string | undefined,
  maxBytes: number
): Either.Either<Uint8Array, DecompressError> => {
  const coding = codingOf(contentEncoding)
  switch (coding) {
    case "identity":
      return bytes.byteLength > maxBytes ? Either.left(tooLarge(maxBytes)) : Either.right(bytes)
    case "gzip":
    case "x-gzip":
      return inflate(bytes, "gzip", maxBytes)
    case "deflate":
      return inflate(bytes, "deflate", maxBytes)
    default:
      return Either.left({
        reason: "unsupported_encoding",
        message: `Content-Encoding ${JSON.stringify(contentEncoding)} is not supported: use gzip, deflate or none`
      })
  }
}
