import { signatureHeader, signedText } from "#src/domain/Webhook"

const encoder = new TextEncoder()

const hex = (bytes: ArrayBuffer) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("")

/** HMAC-SHA256 of `${timestamp}.${body}` with the rule's secret, as lowercase hex. */
export const hmacHex = async (secret: string, timestamp: number, body: string) => {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign"
  ])
  return hex(await crypto.subtle.sign("HMAC", key, encoder.encode(signedText(timestamp, body))))
}

/** The Tapedeck-Signature header for a body sent at `timestamp` (Unix seconds). */
export const sign = async (secret: string, timestamp: number, body: string) =>
  signatureHeader(timestamp, await hmacHex(secret, timestamp, body))

/** A new signing secret: `whsec_` and 32 random bytes in hex. */
export const newWebhookSecret = () => {
  const bytes = new Uint8Array(32)
  crypto.getRandomValues(bytes)
  return `whsec_${hex(bytes.buffer)}`
}
