import { Redacted } from "effect"
import type { Option } from "effect"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64")
const unb64 = (text: string) => new Uint8Array(Buffer.from(text, "base64"))

const keyOf = async (material: string) =>
  crypto.subtle.importKey("raw", await crypto.subtle.digest("SHA-256", encoder.encode(material)), "AES-GCM", false, [
    "encrypt",
    "decrypt"
  ])

/**
 * How webhook signing secrets are stored. With TAPEDECK_WEBHOOK_SECRET_KEY set they are sealed with
 * AES-256-GCM (key = SHA-256 of the setting) as `aesgcm:<iv>:<ciphertext>`; without it they are kept
 * as `plain:<secret>` (the database must then be protected like the secrets themselves). Either way a
 * secret is returned once, at rule creation, and never logged.
 */
export const makeSecretBox = (keySetting: Option.Option<Redacted.Redacted<string>>) => {
  const key = keySetting._tag === "Some" ? keyOf(Redacted.value(keySetting.value)) : undefined
  return {
    encrypted: key !== undefined,
    seal: async (secret: string) => {
      if (key === undefined) return `plain:${secret}`
      const iv = new Uint8Array(12)
      crypto.getRandomValues(iv)
      const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv }, await key, encoder.encode(secret))
      return `aesgcm:${b64(iv)}:${b64(new Uint8Array(sealed))}`
    },
    /** The secret, or an Error when it was sealed with another key (or none is configured now). */
    open: async (stored: string): Promise<string> => {
      if (stored.startsWith("plain:")) return stored.slice("plain:".length)
      const [scheme, iv, sealed] = stored.split(":")
      if (scheme !== "aesgcm" || iv === undefined || sealed === undefined) throw new Error("unknown secret format")
      if (key === undefined)
        throw new Error("the signing secret is encrypted but TAPEDECK_WEBHOOK_SECRET_KEY is not set")
      try {
        return decoder.decode(await crypto.subtle.decrypt({ name: "AES-GCM", iv: unb64(iv) }, await key, unb64(sealed)))
      } catch {
        throw new Error("the signing secret cannot be decrypted with the configured TAPEDECK_WEBHOOK_SECRET_KEY")
      }
    }
  } as const
}
export type SecretBox = ReturnType<typeof makeSecretBox>
