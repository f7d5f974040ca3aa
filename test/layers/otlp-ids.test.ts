import { describe, expect, test } from "bun:test"
import { createHash } from "node:crypto"
import { FastCheck as fc } from "effect"

import { accountNamespace, parentUuid, ROOT_NS, spanUuid, traceUuid, uuidV5 } from "#layers/ingest/OtlpIds"

/** RFC 9562 §5.5 step by step, with node:crypto: the reference uuidV5 is checked against. */
const referenceV5 = (namespace: string, name: string) => {
  const h = createHash("sha1")
    .update(Buffer.from(namespace.replaceAll("-", ""), "hex"))
    .update(name, "utf8")
    .digest()
  h[6] = (h[6]! & 0x0f) | 0x50
  h[8] = (h[8]! & 0x3f) | 0x80
  const x = h.subarray(0, 16).toString("hex")
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`
}

/** Random ids of `n` bytes, as lowercase hex. */
const hex = (n: number) => fc.uint8Array({ minLength: n, maxLength: n }).map((b) => Buffer.from(b).toString("hex"))

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
const UUID_V5 = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe("OTLP ids (docs/otel-mapping.md, Ids)", () => {
  test("ROOT_NS is UUIDv5(NAMESPACE_URL, urn:agent-tracing:otlp-ingest:v1)", () => {
    expect(uuidV5("6ba7b811-9dad-11d1-80b4-00c04fd430c8", "urn:agent-tracing:otlp-ingest:v1")).toBe(ROOT_NS)
    expect(ROOT_NS).toBe("456acc4e-e8f0-5f9f-91cf-0315d3714dfe")
  })

  test("test vectors", () => {
    const acme = accountNamespace("acme")
    const globex = accountNamespace("globex")
    expect(acme).toBe("f44be195-cfed-56d4-a7c1-927f145c9b08")
    expect(globex).toBe("806ff78b-2863-5b05-9ea7-f10b78ac8dd2")
    expect(traceUuid(acme, TRACE)).toBe("3ab331a4-1fa0-50c0-b786-0324c60456de")
    expect(traceUuid(globex, TRACE)).toBe("7e12cb6a-1833-5cb1-bd96-2fab19782d9a")
    expect(spanUuid(acme, TRACE, "00f067aa0ba902b7")).toBe("d3a4d8ca-158d-5ea3-9c5a-b6e958e0113a")
  })

  test("fixture ids", () => {
    const acme = accountNamespace("acme")
    expect(spanUuid(acme, TRACE, "5fb397be34d26b51")).toBe("5a781271-ad9a-56d0-a696-0536eac4c2f9")
    expect(traceUuid(acme, "0af7651916cd43dd8448eb211c80319c")).toBe("1715884f-6e16-549a-8108-d1272d7257cf")
    expect(traceUuid(acme, "d4cda95b652f4a1592b449d5929fda1b")).toBe("f43d7131-880d-5861-adc7-be0c0ba85f9f")
    expect(spanUuid(acme, "d4cda95b652f4a1592b449d5929fda1b", "3e2f1a0b9c8d7e6f")).toBe(
      "15c1f98b-fab4-5d47-b305-f181292fc487"
    )
  })

  test("hex input is case-insensitive", () => {
    const acme = accountNamespace("acme")
    expect(traceUuid(acme, TRACE.toUpperCase())).toBe(traceUuid(acme, TRACE))
    expect(spanUuid(acme, TRACE.toUpperCase(), "00F067AA0BA902B7")).toBe("d3a4d8ca-158d-5ea3-9c5a-b6e958e0113a")
  })

  test("deterministic, version 5 with the RFC variant, and trace and span ids never collide", () => {
    fc.assert(
      fc.property(fc.uuid(), hex(16), hex(8), (account, trace, span) => {
        const ns = accountNamespace(account)
        const t = traceUuid(ns, trace)
        const s = spanUuid(ns, trace, span)
        expect(t).toMatch(UUID_V5)
        expect(s).toMatch(UUID_V5)
        expect(t).not.toBe(s)
        expect(traceUuid(accountNamespace(account), trace)).toBe(t)
        expect(spanUuid(ns, trace, span)).toBe(s)
      })
    )
  })

  test("uuidV5 is RFC 9562's for any namespace and any UTF-8 name, short or long, in any order", () => {
    const name = fc.oneof(
      fc.string({ unit: "binary", maxLength: 40 }),
      fc.string({ unit: "binary", minLength: 80, maxLength: 400 })
    )
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.uuid(), name), { minLength: 1, maxLength: 6 }), (pairs) => {
        for (const [namespace, n] of pairs) expect(uuidV5(namespace, n)).toBe(referenceV5(namespace, n))
      }),
      { numRuns: 500 }
    )
  })

  test("parentUuid is the parent's spanUuid, whatever came before", () => {
    const call = fc.tuple(
      fc.constantFrom(accountNamespace("acme"), accountNamespace("globex")),
      fc.oneof(fc.constant(TRACE), hex(16)),
      fc.oneof(fc.constant("00f067aa0ba902b7"), hex(8))
    )
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 12 }), (calls) => {
        for (const [ns, trace, parent] of calls) {
          expect(parentUuid(ns, trace, parent)).toBe(spanUuid(ns, trace, parent))
          expect(spanUuid(ns, trace, parent)).toBe(referenceV5(ns, "span:" + trace + ":" + parent))
        }
      })
    )
  })

  test("the same OTel trace id in two accounts maps to unrelated UUIDs", () => {
    fc.assert(
      fc.property(fc.uuid(), fc.uuid(), (a, b) => {
        fc.pre(a !== b)
        expect(traceUuid(accountNamespace(a), TRACE)).not.toBe(traceUuid(accountNamespace(b), TRACE))
      })
    )
  })
})
