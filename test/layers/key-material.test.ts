import { describe, expect, it } from "bun:test"
import { Effect } from "effect"
import { digestKey, generateKey, hashKey } from "#layers/auth/KeyMaterial"

describe("key material", () => {
  // Stored digests must stay comparable across versions: this is FIPS 180-2's test vector for "abc".
  it("hashKey is the SHA-256 hex digest", () => {
    expect(Effect.runSync(hashKey("abc"))).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    expect(digestKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  })

  it("generateKey gives svc_ and 256 random bits, a different key each time", () => {
    const keys = Array.from({ length: 100 }, () => Effect.runSync(generateKey))
    for (const key of keys) expect(key).toMatch(/^svc_[A-Za-z0-9_-]{43}$/)
    expect(new Set(keys).size).toBe(keys.length)
  })
})
