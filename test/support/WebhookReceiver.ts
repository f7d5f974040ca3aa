import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface SelfSigned {
  readonly cert: string
  readonly key: string
  /** path of the certificate (PEM), for TAPEDECK_WEBHOOK_CA_FILE */
  readonly certFile: string
  readonly cleanup: () => void
}

/** A throwaway self-signed certificate for `names` (DNS names and IP addresses), made with openssl. */
export const selfSigned = (names: ReadonlyArray<string> = ["localhost", "IP:127.0.0.1"]): SelfSigned => {
  const dir = mkdtempSync(join(tmpdir(), "tapedeck-tls-"))
  const san = names.map((n) => (n.startsWith("IP:") ? n : `DNS:${n}`)).join(",")
  const result = Bun.spawnSync([
    "openssl",
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
    join(dir, "key.pem"),
    "-out",
    join(dir, "cert.pem"),
    "-days",
    "2",
    "-subj",
    "/CN=tapedeck-test",
    "-addext",
    `subjectAltName=${san}`
  ])
  if (result.exitCode !== 0) throw new Error(`openssl failed: ${result.stderr.toString()}`)
  const cert = readFileSync(join(dir, "cert.pem"), "utf8")
  writeFileSync(join(dir, "ca.pem"), cert)
  return {
    cert,
    key: readFileSync(join(dir, "key.pem"), "utf8"),
    certFile: join(dir, "ca.pem"),
    cleanup: () => rmSync(dir, { recursive: true, force: true })
  }
}

export interface Received {
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: string
  readonly at: number
}

export interface Receiver {
  readonly port: number
  readonly url: (path: string) => string
  readonly received: Array<Received>
  readonly stop: () => void
}

/** An https server on 127.0.0.1 that records every request and answers with `answer` (default 200). */
export const startReceiver = (
  tls: { cert: string; key: string },
  answer: (request: Received, index: number) => Response | undefined = () => undefined
): Receiver => {
  const received: Array<Received> = []
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    tls: { cert: tls.cert, key: tls.key },
    async fetch(request) {
      const entry: Received = {
        path: new URL(request.url).pathname,
        headers: Object.fromEntries(request.headers),
        body: await request.text(),
        at: Date.now()
      }
      received.push(entry)
      return answer(entry, received.length - 1) ?? new Response("ok", { status: 200 })
    }
  })
  return {
    port: server.port!,
    url: (path) => `https://127.0.0.1:${server.port}${path}`,
    received,
    stop: () => server.stop(true)
  }
}

/**
 * The documented verification: recompute HMAC-SHA256(secret, `${t}.${body}`), compare it in constant time with
 * v1 from `Tapedeck-Signature: t=<unix>,v1=<hex>`, and refuse timestamps older than `toleranceSeconds`.
 */
export const verifySignature = async (secret: string, header: string, body: string, toleranceSeconds = 300) => {
  const parts = Object.fromEntries(header.split(",").map((p) => p.split("=", 2) as [string, string]))
  const t = Number(parts.t)
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceSeconds) return false
  const { createHmac, timingSafeEqual } = await import("node:crypto")
  const expected = createHmac("sha256", secret).update(`${t}.${body}`).digest()
  const given = Buffer.from(parts.v1 ?? "", "hex")
  return given.length === expected.length && timingSafeEqual(given, expected)
}
