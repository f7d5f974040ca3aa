import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as nodeTls from "node:tls"
import { FastCheck as fc } from "effect"
import { AddressBlocked, type Resolver } from "#layers/webhooks/AddressGuard"
import { safePost, type SafeFetchOptions } from "#layers/webhooks/SafeFetch"
import { newWebhookSecret, sign } from "#layers/webhooks/Signing"
import { makeSecretBox } from "#layers/webhooks/SecretBox"
import { Option, Redacted, Schema } from "effect"
import { stepJobId } from "#layers/webhooks/WebhookDelivery"
import { parseSignatureHeader, webhookBackoffMs } from "#src/domain/Webhook"
import {
  type Receiver,
  selfSigned,
  type SelfSigned,
  startReceiver,
  verifySignature
} from "../support/WebhookReceiver.ts"

let tls: SelfSigned
let receiver: Receiver
let otherName: SelfSigned
let otherReceiver: Receiver

beforeAll(() => {
  tls = selfSigned(["hooks.test", "IP:127.0.0.1"])
  otherName = selfSigned(["someone-else.test"])
  receiver = startReceiver(tls, (r) => {
    if (r.path === "/to-private")
      return new Response(null, { status: 307, headers: { location: "https://10.0.0.7/x" } })
    if (r.path === "/to-metadata")
      return new Response(null, { status: 302, headers: { location: "https://[::ffff:a9fe:a9fe]/" } })
    if (r.path === "/to-http")
      return new Response(null, { status: 308, headers: { location: `http://hooks.test:${receiver.port}/ok` } })
    if (r.path === "/to-ok") return new Response(null, { status: 308, headers: { location: "/ok" } })
    if (r.path === "/loop") return new Response(null, { status: 307, headers: { location: "/loop" } })
    if (r.path === "/slow") return new Promise<Response>(() => {}) as never
    if (r.path === "/big") return new Response("x".repeat(5_000_000), { status: 201 })
    return undefined
  })
  otherReceiver = startReceiver(otherName)
}, 60_000)
afterAll(() => {
  receiver.stop()
  otherReceiver.stop()
  tls.cleanup()
  otherName.cleanup()
}, 60_000)

/** A resolver that answers from a table and counts its lookups. */
const table = (entries: Record<string, ReadonlyArray<string>>) => {
  const calls: Array<string> = []
  const resolver: Resolver = async (host) => {
    calls.push(host)
    const addresses = entries[host]
    if (addresses === undefined) throw new Error("ENOTFOUND")
    return addresses.map((address) => ({ address, family: address.includes(":") ? (6 as const) : (4 as const) }))
  }
  return { resolver, calls }
}

const options = (resolver: Resolver, allowLoopback = true): SafeFetchOptions => ({
  resolver,
  guard: { allowLoopback },
  timeoutMs: 15_000,
  maxRedirects: 3,
  extraCa: tls.cert + otherName.cert
})

const post = (url: string, opts: SafeFetchOptions) =>
  safePost({ url, headers: { "Tapedeck-Event": "test" }, body: "{}" }, opts)

const refusal = async (promise: Promise<unknown>) => {
  try {
    await promise
  } catch (e) {
    return e
  }
  throw new Error("expected a refusal")
}

describe("safePost", () => {
  test("connects to the checked address with the original Host and certificate name", async () => {
    const { resolver, calls } = table({ "hooks.test": ["127.0.0.1"] })
    const response = await post(`https://hooks.test:${receiver.port}/ok`, options(resolver))
    expect(response).toEqual({ status: 200, url: `https://hooks.test:${receiver.port}/ok`, redirects: 0 })
    const last = receiver.received.at(-1)!
    expect(last.headers.host).toBe(`hooks.test:${receiver.port}`)
    expect(last.headers["tapedeck-event"]).toBe("test")
    expect(calls).toEqual(["hooks.test"])
  }, 60_000)

  test("interim 1xx answers (100 Continue, 103 Early Hints) are skipped: the final status decides", async () => {
    const raw = nodeTls.createServer({ cert: tls.cert, key: tls.key }, (socket) => {
      socket.once("data", () => {
        socket.end(
          "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
        )
      })
    })
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve))
    try {
      const port = (raw.address() as { port: number }).port
      const { resolver } = table({ "hooks.test": ["127.0.0.1"] })
      expect((await post(`https://hooks.test:${port}/interim`, options(resolver))).status).toBe(204)
    } finally {
      raw.close()
    }
  }, 60_000)

  test("a name resolving to a private address is refused before any connection", async () => {
    const before = receiver.received.length
    const { resolver } = table({
      "evil.test": ["10.0.0.5"],
      "mixed.test": ["93.184.216.34", "169.254.169.254"],
      "v6.test": ["::ffff:127.0.0.1"]
    })
    for (const host of ["evil.test", "mixed.test"]) {
      const e = await refusal(post(`https://${host}/`, options(resolver)))
      expect(e).toBeInstanceOf(AddressBlocked)
    }
    // loopback, when the test-only switch is off
    const e = await refusal(post(`https://v6.test:${receiver.port}/ok`, options(resolver, false)))
    expect(e).toBeInstanceOf(AddressBlocked)
    expect((e as Error).message).toContain("v6.test resolves to ::ffff:127.0.0.1")
    expect(receiver.received.length).toBe(before)
  }, 60_000)

  test("the system resolver: localhost resolves to loopback and is refused without the test switch", async () => {
    const { systemResolver } = await import("#layers/webhooks/AddressGuard")
    const e = await refusal(post(`https://localhost:${receiver.port}/ok`, options(systemResolver, false)))
    expect(e).toBeInstanceOf(AddressBlocked)
    expect((e as Error).message).toMatch(/localhost resolves to (127\.0\.0\.1|::1)/)
  }, 60_000)

  test("redirects: each hop is resolved and checked again; private targets, http downgrades and loops are refused", async () => {
    const { resolver } = table({ "hooks.test": ["127.0.0.1"] })
    const ok = await post(`https://hooks.test:${receiver.port}/to-ok`, options(resolver))
    expect(ok).toMatchObject({ status: 200, redirects: 1 })
    expect(receiver.received.at(-1)).toMatchObject({ path: "/ok", body: "{}" })
    const toPrivate = await refusal(post(`https://hooks.test:${receiver.port}/to-private`, options(resolver)))
    expect(toPrivate).toBeInstanceOf(AddressBlocked)
    expect((toPrivate as Error).message).toContain("10.0.0.7 is a private address")
    const toMetadata = await refusal(post(`https://hooks.test:${receiver.port}/to-metadata`, options(resolver)))
    expect(toMetadata).toBeInstanceOf(AddressBlocked)
    const toHttp = await refusal(post(`https://hooks.test:${receiver.port}/to-http`, options(resolver)))
    expect((toHttp as Error).message).toContain("https only")
    const loop = await refusal(post(`https://hooks.test:${receiver.port}/loop`, options(resolver)))
    expect((loop as Error).message).toContain("more than 3 redirects")
  }, 60_000)

  test("the certificate must match the URL's host name, not just the address", async () => {
    const { resolver } = table({ "hooks.test": ["127.0.0.1"] })
    // otherReceiver's certificate names someone-else.test only
    const e = await refusal(post(`https://hooks.test:${otherReceiver.port}/ok`, options(resolver)))
    expect((e as Error).message.toLowerCase()).toMatch(/altname|hostname|certificate|ip/)
    const untrusted = await refusal(
      post(`https://hooks.test:${receiver.port}/ok`, { ...options(resolver), extraCa: undefined })
    )
    expect((untrusted as Error).message.toLowerCase()).toContain("certificate")
  }, 60_000)

  test("times out, and never buffers a large response body", async () => {
    const { resolver } = table({ "hooks.test": ["127.0.0.1"] })
    const started = Date.now()
    const slow = await refusal(
      post(`https://hooks.test:${receiver.port}/slow`, { ...options(resolver), timeoutMs: 300 })
    )
    expect((slow as Error).message).toContain("timed out after 300 ms")
    expect(Date.now() - started).toBeLessThan(2000)
    const big = await post(`https://hooks.test:${receiver.port}/big`, options(resolver))
    expect(big.status).toBe(201)
  }, 60_000)
})

describe("signing", () => {
  test("property: the documented verification accepts our signature and refuses any other body, secret or time", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string(), fc.string({ minLength: 1 }), async (body, other) => {
        const secret = newWebhookSecret()
        const t = Math.floor(Date.now() / 1000)
        const header = await sign(secret, t, body)
        expect(parseSignatureHeader(header)?.timestamp).toBe(t)
        expect(await verifySignature(secret, header, body)).toBe(true)
        expect(await verifySignature(secret, header, body + other)).toBe(false)
        expect(await verifySignature(newWebhookSecret(), header, body)).toBe(false)
        expect(await verifySignature(secret, await sign(secret, t - 3600, body), body)).toBe(false)
      }),
      { numRuns: 50 }
    )
  }, 60_000)

  test("secrets: sealed with AES-GCM when a key is configured, never in clear; a wrong key cannot open them", async () => {
    const box = makeSecretBox(Option.some(Redacted.make("k1")))
    const secret = newWebhookSecret()
    const sealed = await box.seal(secret)
    expect(sealed.startsWith("aesgcm:")).toBe(true)
    expect(sealed).not.toContain(secret.slice(6))
    expect(await box.open(sealed)).toBe(secret)
    await expect(makeSecretBox(Option.some(Redacted.make("k2"))).open(sealed)).rejects.toThrow("cannot be decrypted")
    await expect(makeSecretBox(Option.none()).open(sealed)).rejects.toThrow("TAPEDECK_WEBHOOK_SECRET_KEY")
    const plain = makeSecretBox(Option.none())
    expect(await plain.open(await plain.seal(secret))).toBe(secret)
  }, 60_000)

  test("the retry schedule grows exponentially and is capped at an hour", () => {
    expect([1, 2, 3, 4, 5].map((n) => webhookBackoffMs(10_000, n))).toEqual([
      10_000, 40_000, 160_000, 640_000, 2_560_000
    ])
    expect(webhookBackoffMs(10_000, 6)).toBe(3_600_000)
    expect(webhookBackoffMs(10_000, 1000)).toBe(3_600_000)
  }, 60_000)

  test("property: a delivery step's job id is a UUID fixed by (delivery, attempt, wait) and differs between steps", () => {
    const step = fc.record({
      deliveryId: fc.uuid(),
      attempt: fc.integer({ min: 1, max: 20 }),
      polls: fc.integer({ min: 0, max: 50 })
    })
    fc.assert(
      fc.property(step, step, (a, b) => {
        const id = stepJobId(a)
        expect(Schema.is(Schema.UUID)(id)).toBe(true)
        expect(stepJobId({ ...a, deliveryId: a.deliveryId.toUpperCase() })).toBe(id)
        const same =
          a.deliveryId.toLowerCase() === b.deliveryId.toLowerCase() && a.attempt === b.attempt && a.polls === b.polls
        expect(stepJobId(b) === id).toBe(same)
      })
    )
  })
})
