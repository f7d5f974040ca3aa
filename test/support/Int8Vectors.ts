/**
 * Stored one-byte vectors (VectorText.int8Bytes) read back as unit vectors: the direction the re-rank compares with,
 * written plainly as the tests' reference for the service's distance (`int8Distance`) and the stored rows.
 */
export const int8Direction = (bytes: ArrayLike<number>): Array<number> => {
  let norm = 0
  for (let i = 0; i < bytes.length; i++) norm += (bytes[i]! - 128) ** 2
  norm = Math.sqrt(norm)
  return Array.from(bytes, (b) => (norm === 0 ? 0 : (b - 128) / norm))
}
