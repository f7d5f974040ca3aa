import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { classifyAddress, hostNameProblem, isIpLiteral } from "#layers/webhooks/AddressGuard"

/** What a URL host becomes once the WHATWG URL parser has normalised it (numeric IPv4 forms, IPv6 brackets). */
const hostOf = (url: string) => new URL(url).hostname

// Every form an attacker may use to reach a private, internal or special address: refused.
const REFUSED: ReadonlyArray<readonly [string, string]> = [
  ["127.0.0.1", "loopback"],
  ["127.255.255.254", "loopback"],
  ["10.0.0.1", "private"],
  ["172.16.5.4", "private"],
  ["172.31.255.255", "private"],
  ["192.168.1.1", "private"],
  ["169.254.169.254", "metadata"],
  ["169.254.10.10", "linkLocal"],
  ["100.64.0.1", "carrierGradeNat"],
  ["100.100.100.200", "metadata"],
  ["0.0.0.0", "unspecified"],
  ["0.1.2.3", "unspecified"],
  ["255.255.255.255", "broadcast"],
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["198.18.0.1", "reserved"],
  ["192.0.2.10", "reserved"],
  ["198.51.100.7", "reserved"],
  ["203.0.113.9", "reserved"],
  ["240.0.0.1", "reserved"],
  ["192.0.0.170", "reserved"],
  // numeric encodings of IPv4
  ["2130706433", "loopback"],
  ["0177.0.0.1", "loopback"],
  ["0x7f.0.0.1", "loopback"],
  ["0x7f000001", "loopback"],
  ["127.1", "loopback"],
  ["10.1", "private"],
  ["3232235777", "private"],
  // IPv6
  ["::1", "loopback"],
  ["::", "unspecified"],
  ["fe80::1", "linkLocal"],
  ["fc00::1", "uniqueLocal"],
  ["fd12:3456::1", "uniqueLocal"],
  ["fd00:ec2::254", "metadata"],
  ["ff02::1", "multicast"],
  ["[::1]", "loopback"],
  ["::ffff:127.0.0.1", "IPv4-mapped"],
  ["::ffff:7f00:1", "IPv4-mapped"],
  ["::ffff:10.0.0.1", "IPv4-mapped"],
  ["::ffff:169.254.169.254", "metadata"],
  ["::127.0.0.1", "IPv4-compatible"],
  ["::7f00:1", "IPv4-compatible"],
  ["64:ff9b::7f00:1", "NAT64"],
  ["64:ff9b::a00:1", "NAT64"],
  ["64:ff9b::169.254.169.254", "NAT64"],
  ["64:ff9b:1::a00:1", "local-use NAT64"],
  ["2002:7f00:1::1", "6to4"],
  ["2002:c0a8:101::1", "6to4"],
  ["2002:a9fe:a9fe::", "6to4"],
  ["2001:db8::1", "reserved"],
  ["2001:0:4136:e378::1", "teredo"],
  ["100::1", "discard"],
  ["fec0::1", "deprecatedSiteLocal"],
  ["::ffff:0:7f00:1", "IPv4-translated"],
  ["fe80::1%eth0", "zone"],
  ["not-an-ip", "not an IP"]
]

const ALLOWED = [
  "8.8.8.8",
  "1.1.1.1",
  "93.184.216.34",
  "172.15.255.255",
  "172.32.0.1",
  "100.63.255.255",
  "2606:4700:4700::1111",
  "2a00:1450:4001:80b::200e",
  "::ffff:8.8.8.8",
  "64:ff9b::808:808",
  "2002:808:808::1"
]

describe("the address classifier", () => {
  test(`refuses ${REFUSED.length} private, internal and special addresses in every encoding`, () => {
    expect(REFUSED.length).toBeGreaterThanOrEqual(20)
    for (const [address, why] of REFUSED) {
      const verdict = classifyAddress(address)
      if (verdict.allowed) throw new Error(`${address} (${why}) was allowed`)
      expect(verdict.reason.length).toBeGreaterThan(0)
    }
  })

  test("explains why", () => {
    expect(classifyAddress("::ffff:127.0.0.1")).toEqual({
      allowed: false,
      reason: "::ffff:7f00:1 embeds 127.0.0.1 (IPv4-mapped): 127.0.0.1 is a loopback address"
    })
    expect(classifyAddress("169.254.169.254")).toEqual({
      allowed: false,
      reason: "169.254.169.254 is a cloud metadata address"
    })
    expect(classifyAddress("0x7f.0.0.1")).toEqual({ allowed: false, reason: "127.0.0.1 is a loopback address" })
  })

  test("allows public unicast addresses, also through NAT64, 6to4 and IPv4-mapped forms", () => {
    for (const address of ALLOWED) expect(classifyAddress(address)).toEqual({ allowed: true })
  })

  test("the test-only switch allows loopback and nothing else", () => {
    const loose = { allowLoopback: true }
    expect(classifyAddress("127.0.0.1", loose).allowed).toBe(true)
    expect(classifyAddress("::1", loose).allowed).toBe(true)
    expect(classifyAddress("::ffff:127.0.0.1", loose).allowed).toBe(true)
    for (const address of [
      "10.0.0.1",
      "169.254.169.254",
      "fd00:ec2::254",
      "192.168.0.1",
      "::ffff:10.0.0.1",
      "0.0.0.0"
    ]) {
      expect(classifyAddress(address, loose).allowed).toBe(false)
    }
  })

  test("URL hosts: the numeric IPv4 encodings normalise to an address the classifier refuses", () => {
    const urls = [
      "https://2130706433/hook",
      "https://0177.0.0.1/hook",
      "https://0x7f.0.0.1/hook",
      "https://0x7f.1/hook",
      "https://127.1/hook",
      "https://017700000001/hook",
      "https://[::ffff:127.0.0.1]/hook",
      "https://[::ffff:7f00:1]:8443/hook",
      "https://[64:ff9b::a00:1]/hook",
      "https://[2002:a9fe:a9fe::1]/hook",
      "https://169.254.169.254/latest/meta-data",
      "https://[fd00:ec2::254]/"
    ]
    for (const url of urls) {
      const host = hostOf(url)
      expect(isIpLiteral(host)).toBe(true)
      expect(classifyAddress(host).allowed).toBe(false)
    }
    expect(hostNameProblem("metadata.google.internal")).toContain("metadata")
    expect(hostNameProblem("Metadata.Google.Internal.")).toContain("metadata")
    expect(hostNameProblem("hooks.example.com")).toBeUndefined()
  })

  test("property: an IPv4 address and its IPv4-mapped, NAT64 and 6to4 forms get the same verdict", () => {
    fc.assert(
      fc.property(fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)), ([a, b, c, d]) => {
        const v4 = `${a}.${b}.${c}.${d}`
        const hex = (x: number, y: number) => ((x << 8) | y).toString(16)
        const verdict = classifyAddress(v4).allowed
        expect(classifyAddress(`::ffff:${v4}`).allowed).toBe(verdict)
        expect(classifyAddress(`64:ff9b::${hex(a, b)}:${hex(c, d)}`).allowed).toBe(verdict)
        expect(classifyAddress(`2002:${hex(a, b)}:${hex(c, d)}::1`).allowed).toBe(verdict)
        // and its single-number encoding
        expect(classifyAddress(String(((a << 24) >>> 0) + (b << 16) + (c << 8) + d)).allowed).toBe(verdict)
      }),
      { numRuns: 500 }
    )
  })

  test("property: every address of the private and loopback blocks is refused", () => {
    fc.assert(
      fc.property(
        fc.constantFrom([10, 8], [127, 8], [172, 12], [192, 16], [169, 16], [100, 10]),
        fc.nat(0xffffff),
        ([first, bits], rest) => {
          const base =
            first === 172
              ? 0xac100000
              : first === 192
                ? 0xc0a80000
                : first === 169
                  ? 0xa9fe0000
                  : first === 100
                    ? 0x64400000
                    : (first! << 24) >>> 0
          const address = (base + (rest & ((1 << (32 - bits!)) - 1))) >>> 0
          const text = [24, 16, 8, 0].map((s) => (address >>> s) & 255).join(".")
          expect(classifyAddress(text).allowed).toBe(false)
        }
      ),
      { numRuns: 500 }
    )
  })
})
