import * as tls from "node:tls"
import { AddressBlocked, type GuardOptions, isIpLiteral, type Resolver, resolveChecked } from "./AddressGuard.ts"

export interface SafeFetchOptions {
  readonly resolver: Resolver
  readonly guard: GuardOptions
  /** for the whole exchange, redirects included */
  readonly timeoutMs: number
  readonly maxRedirects: number
  /** extra trusted CA certificates (PEM), added to the system roots */
  readonly extraCa?: string | undefined
}

export interface SafeRequest {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export interface SafeResponse {
  readonly status: number
  /** the URL that answered (after redirects) */
  readonly url: string
  readonly redirects: number
}

/** Most bytes read of a response: its status lines and headers (interim ones included). The body is never read. */
const MAX_HEAD_BYTES = 16 * 1024

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/

interface Head {
  readonly status: number
  readonly location: string | undefined
}

const parseHead = (text: string): Head => {
  const lines = text.split("\r\n")
  const statusLine = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")
  if (statusLine === null) throw new Error("the server did not answer with HTTP/1.x")
  let location: string | undefined
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":")
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === "location") location = line.slice(colon + 1).trim()
  }
  return { status: Number(statusLine[1]), location }
}

/** One POST to one checked address over TLS, the certificate checked against the URL's host name. */
const exchange = (
  url: URL,
  address: string,
  request: SafeRequest,
  options: SafeFetchOptions,
  deadline: number
): Promise<Head> =>
  new Promise((resolve, reject) => {
    const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
    const port = url.port === "" ? 443 : Number(url.port)
    let settled = false
    const chunks: Array<Buffer> = []
    let size = 0
    const finish = (error: Error | undefined, head?: Head) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      if (error !== undefined) reject(error)
      else resolve(head!)
    }
    const remaining = Math.max(1, deadline - Date.now())
    const timer = setTimeout(() => finish(new Error(`timed out after ${options.timeoutMs} ms`)), remaining)
    const socket = tls.connect({
      host: address,
      port,
      // SNI and the certificate check use the URL's name, while the connection goes to the checked address.
      ...(isIpLiteral(hostname) ? {} : { servername: hostname }),
      ...(options.extraCa === undefined ? {} : { ca: [...tls.rootCertificates, options.extraCa] }),
      rejectUnauthorized: true,
      checkServerIdentity: (_host, cert) => tls.checkServerIdentity(hostname, cert),
      ALPNProtocols: ["http/1.1"]
    })
    socket.on("secureConnect", () => {
      const body = Buffer.from(request.body, "utf8")
      const lines = [
        `POST ${url.pathname}${url.search} HTTP/1.1`,
        `Host: ${url.host}`,
        "Content-Type: application/json",
        `Content-Length: ${body.byteLength}`,
        "Connection: close",
        "User-Agent: Tapedeck-Webhooks/1"
      ]
      for (const [name, value] of Object.entries(request.headers)) {
        if (HEADER_NAME.test(name) && !/[\r\n]/.test(value)) lines.push(`${name}: ${value}`)
      }
      socket.write(Buffer.concat([Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "latin1"), body]))
    })
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk)
      size += chunk.byteLength
      let text = Buffer.concat(chunks).toString("latin1")
      try {
        for (let end = text.indexOf("\r\n\r\n"); end >= 0; end = text.indexOf("\r\n\r\n")) {
          const head = parseHead(text.slice(0, end))
          // An interim answer (100 Continue, 103 Early Hints) precedes the final one: read on.
          if (head.status >= 200 || head.status === 101) return finish(undefined, head)
          text = text.slice(end + 4)
        }
      } catch (e) {
        return finish(e as Error)
      }
      if (size > MAX_HEAD_BYTES) finish(new Error(`the response head exceeds ${MAX_HEAD_BYTES} bytes`))
    })
    socket.on("error", (e) => finish(new Error(e.message)))
    socket.on("close", () => finish(new Error("the connection closed before a response")))
  })

/**
 * POSTs a webhook without letting it reach a private or internal address: the host is resolved once,
 * every address checked (AddressGuard), and the connection made to a checked address with the original
 * Host header, SNI and certificate name, so DNS rebinding cannot slip in between check and connect.
 * Redirects (301, 302, 303, 307, 308) are followed up to `maxRedirects` times, each target checked the
 * same way and re-POSTed the same body; a redirect to a non-https URL is refused. Only the response's
 * status line and headers are read (at most 16 KB).
 */
export const safePost = async (request: SafeRequest, options: SafeFetchOptions): Promise<SafeResponse> => {
  const deadline = Date.now() + options.timeoutMs
  let url = new URL(request.url)
  for (let redirects = 0; ; redirects++) {
    if (url.protocol !== "https:") throw new AddressBlocked(`${url.protocol} URLs are refused: https only`)
    if (url.username !== "" || url.password !== "") throw new AddressBlocked("URLs with credentials are refused")
    const addresses = await resolveChecked(url.hostname, options.resolver, options.guard)
    let head: Head | undefined
    let lastError: Error | undefined
    for (const { address } of addresses) {
      if (Date.now() >= deadline) throw new Error(`timed out after ${options.timeoutMs} ms`)
      try {
        head = await exchange(url, address, request, options, deadline)
        break
      } catch (e) {
        lastError = e as Error
        // A refused or unreachable address: try the next one; anything after the handshake is final.
        if (!/ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL/.test(lastError.message)) break
      }
    }
    if (head === undefined) throw lastError ?? new Error("no address answered")
    if ([301, 302, 303, 307, 308].includes(head.status) && head.location !== undefined) {
      if (redirects >= options.maxRedirects) throw new Error(`more than ${options.maxRedirects} redirects`)
      url = new URL(head.location, url)
      continue
    }
    return { status: head.status, url: url.toString(), redirects }
  }
}
