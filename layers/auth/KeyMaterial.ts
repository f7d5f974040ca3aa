import { createHash } from "node:crypto"
import { Effect } from "effect"
import { KEY_PREFIX } from "#src/domain/ApiKey"

/**
 * SHA-256 hex digest: keys are high-entropy secrets, so a fast digest (looked up by an index) suffices. Synchronous:
 * every authenticated request takes one, and WebCrypto's promise costs more than the hash of a 47-byte key.
 */
export const digestKey = (key: string) => createHash("sha256").update(key).digest("hex")

/** `digestKey` as an effect. */
export const hashKey = (key: string) => Effect.sync(() => digestKey(key))

/** A new key: `svc_` and 32 random bytes in base64url (256 bits of entropy). */
export const generateKey = Effect.sync(() => {
  const bytes = crypto.getRandomValues(new Uint8Array(32))
  return KEY_PREFIX + Buffer.from(bytes).toString("base64url")
})
