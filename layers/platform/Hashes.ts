/**
 * The runtime's own hash functions: the one module under layers/ that calls Bun directly. On another runtime this
 * module is what changes, with the same outputs: stored span-text digests and index names are made of them.
 * (A module, not a service: these are pure functions called per span on the ingest path.)
 */

/** Wyhash (64-bit) of a text in base 36: short and stable. */
export const shortHash = (text: string): string => Bun.hash(text).toString(36)

/** SHA-1 of `input` into `digest` (20 bytes), with no allocation: UUIDv5 of every OTLP id goes through it. */
export const sha1Into = (input: Uint8Array, digest: Uint8Array): Uint8Array =>
  Bun.SHA1.hash(input, digest) as Uint8Array

/** SHA-256 of a text's UTF-8 bytes, hex: the key of a shared span content part (PayloadSplit). */
export const sha256Hex = (text: string): string => new Bun.CryptoHasher("sha256").update(text).digest("hex")

/** Wyhash (64-bit) of a text, 16 hex digits. */
export const hash64Hex = (text: string): string => Bun.hash(text).toString(16).padStart(16, "0")
