import { createHmac, timingSafeEqual } from "node:crypto"
import { Effect, Option } from "effect"
import { authentication } from "tapedeck"

/** A token of the team's sign-on: `sso.<account>.<subject>.<HMAC-SHA256 of "account.subject", hex>`. */
export const signToken = (secret: string, account: string, subject: string) =>
  `sso.${account}.${subject}.${createHmac("sha256", secret).update(`${account}.${subject}`).digest("hex")}`

export const signedTokensLive = (secret: string) =>
  authentication({
    name: "sso",
    authenticate: (token) =>
      Effect.sync(() => {
        const parts = token.split(".")
        if (parts.length !== 4 || parts[0] !== "sso") return Option.none()
        const [, account, subject, signature] = parts as [string, string, string, string]
        const expected = createHmac("sha256", secret).update(`${account}.${subject}`).digest()
        const given = Buffer.from(signature, "hex")
        if (given.length !== expected.length || !timingSafeEqual(given, expected)) return Option.none()
        return Option.some({ account, subject })
      })
  })
