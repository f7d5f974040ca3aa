import { lookup } from "node:dns/promises"
import ipaddr from "ipaddr.js"

/** Whether an address may be connected to, and why not. */
export type AddressVerdict = { readonly allowed: true } | { readonly allowed: false; readonly reason: string }

export interface GuardOptions {
  /**
   * Test-only (TAPEDECK_WEBHOOK_ALLOW_LOOPBACK_FOR_TESTS): loopback addresses (127.0.0.0/8, ::1) are allowed.
   * Every other blocked range stays blocked.
   */
  readonly allowLoopback: boolean
}

export const STRICT: GuardOptions = { allowLoopback: false }

/** Names of cloud metadata services, refused before any lookup (they resolve to link-local addresses anyway). */
const BLOCKED_NAMES = new Set([
  "metadata.google.internal",
  "metadata.goog",
  "metadata",
  "instance-data",
  "instance-data.ec2.internal"
])

const METADATA = new Set(["169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200"])

const ALLOWED: AddressVerdict = { allowed: true }
const blocked = (reason: string): AddressVerdict => ({ allowed: false, reason })

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parse("2000::")

const classifyV4 = (address: ipaddr.IPv4, options: GuardOptions): AddressVerdict => {
  const text = address.toString()
  if (METADATA.has(text)) return blocked(`${text} is a cloud metadata address`)
  const range = address.range()
  if (range === "unicast") return ALLOWED
  if (range === "loopback" && options.allowLoopback) return ALLOWED
  return blocked(`${text} is a ${range} address`)
}

const v4FromParts = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff])

const classifyV6 = (address: ipaddr.IPv6, options: GuardOptions): AddressVerdict => {
  const text = address.toString()
  if (METADATA.has(text)) return blocked(`${text} is a cloud metadata address`)
  const parts = address.parts
  const embedded = (v4: ipaddr.IPv4, form: string): AddressVerdict => {
    const verdict = classifyV4(v4, options)
    return verdict.allowed ? verdict : blocked(`${text} embeds ${v4.toString()} (${form}): ${verdict.reason}`)
  }
  const range = address.range()
  switch (range) {
    case "ipv4Mapped":
    case "rfc6145":
      return embedded(v4FromParts(parts[6]!, parts[7]!), range === "ipv4Mapped" ? "IPv4-mapped" : "IPv4-translated")
    case "rfc6052":
      // 64:ff9b::/96 carries a public IPv4 address through NAT64; 64:ff9b:1::/48 is for local use only.
      if (parts[2] !== 0) return blocked(`${text} is a local-use NAT64 address`)
      return embedded(v4FromParts(parts[6]!, parts[7]!), "NAT64")
    case "6to4":
      return embedded(v4FromParts(parts[1]!, parts[2]!), "6to4")
    case "loopback":
      return options.allowLoopback ? ALLOWED : blocked(`${text} is a loopback address`)
    case "unicast": {
      if (parts.slice(0, 6).every((p) => p === 0)) {
        return blocked(
          `${text} is an IPv4-compatible IPv6 address (deprecated; embeds ${v4FromParts(parts[6]!, parts[7]!).toString()})`
        )
      }
      // Outside 2000::/3 nothing is assigned for global unicast.
      if (!address.match(GLOBAL_UNICAST_V6, 3)) return blocked(`${text} is not a global unicast address`)
      return ALLOWED
    }
    default:
      return blocked(`${text} is a ${range} address`)
  }
}

/**
 * The pure classifier: an IP address (any form ipaddr.js parses, including the numeric IPv4 encodings
 * `2130706433`, `0177.0.0.1`, `0x7f.0.0.1`, `127.1`, and bracketed IPv6) is allowed only when it is a
 * global unicast address; embedded IPv4 (mapped, translated, NAT64, 6to4) is judged as IPv4.
 */
export const classifyAddress = (input: string, options: GuardOptions = STRICT): AddressVerdict => {
  const text = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input
  if (text.includes("%")) return blocked(`${text} carries a zone id`)
  if (!ipaddr.isValid(text)) return blocked(`${text} is not an IP address`)
  const address = ipaddr.parse(text)
  return address.kind() === "ipv4"
    ? classifyV4(address as ipaddr.IPv4, options)
    : classifyV6(address as ipaddr.IPv6, options)
}

/** Whether a URL host is an IP literal (URL hosts are already normalised: `0x7f.1` arrives as `127.0.0.1`). */
export const isIpLiteral = (host: string) => {
  const text = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host
  return ipaddr.isValid(text)
}

/** Refusal of a host name before resolution (cloud metadata names), or undefined. */
export const hostNameProblem = (host: string): string | undefined => {
  const name = host.toLowerCase().replace(/\.$/, "")
  if (BLOCKED_NAMES.has(name)) return `${name} is a cloud metadata host`
  return undefined
}

export interface ResolvedAddress {
  readonly address: string
  readonly family: 4 | 6
}

/** Turns a host name into addresses (node:dns by default; tests inject their own). */
export type Resolver = (host: string) => Promise<ReadonlyArray<ResolvedAddress>>

export const systemResolver: Resolver = async (host) => {
  const results = await lookup(host, { all: true, verbatim: true })
  return results.map((r) => ({ address: r.address, family: r.family === 6 ? 6 : 4 }))
}

/** An address the guard refused: never retried against the same URL. */
export class AddressBlocked extends Error {
  readonly _tag = "AddressBlocked"
}

/**
 * Resolves a URL host once and checks every address: if any is refused the host is refused (a name
 * with one public and one private record is not trusted). The caller connects to the returned address,
 * never resolving the name again, so a DNS answer cannot change between check and connect.
 */
export const resolveChecked = async (
  host: string,
  resolver: Resolver,
  options: GuardOptions
): Promise<ReadonlyArray<ResolvedAddress>> => {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host
  if (isIpLiteral(bare)) {
    const verdict = classifyAddress(bare, options)
    if (!verdict.allowed) throw new AddressBlocked(verdict.reason)
    return [{ address: ipaddr.parse(bare).toString(), family: ipaddr.parse(bare).kind() === "ipv4" ? 4 : 6 }]
  }
  const nameProblem = hostNameProblem(bare)
  if (nameProblem !== undefined) throw new AddressBlocked(nameProblem)
  let addresses: ReadonlyArray<ResolvedAddress>
  try {
    addresses = await resolver(bare)
  } catch (e) {
    throw new Error(`cannot resolve ${bare}: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (addresses.length === 0) throw new Error(`cannot resolve ${bare}: no addresses`)
  for (const a of addresses) {
    const verdict = classifyAddress(a.address, options)
    if (!verdict.allowed) throw new AddressBlocked(`${bare} resolves to ${a.address}: ${verdict.reason}`)
  }
  return addresses
}
