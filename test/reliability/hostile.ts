/**
 * Slow and hostile clients: while hundreds of idle and trickling connections are held open, hostile requests are
 * sent (very large and deeply nested JSON, truncated protobuf, a gzip bomb, huge headers, malformed framing), and
 * a well-behaved client keeps calling /health and the API. Run it with `bun test/reliability/hostile.ts`.
 *
 * Checked: every hostile request is refused with a 4xx (with the `{error, code, retryable}` body where the server
 * gets as far as answering in JSON) or the connection is closed by the server, never a 5xx; the well-behaved
 * client's calls all succeed, and its latency is reported; the server's RSS is reported before and after.
 *
 * Knobs: RELIABILITY_DATABASE_URL, RELIABILITY_IDLE_CONNECTIONS (default 500), RELIABILITY_TRICKLE_CONNECTIONS (50).
 */
import net from "node:net"
import { gzipSync } from "node:zlib"
import { freshDatabase, KEY, latencyStats, log, numberEnv, runBench, sleep, startServer } from "../bench/Harness.ts"

if (process.env.RELIABILITY_DATABASE_URL) process.env.BENCH_DATABASE_URL = process.env.RELIABILITY_DATABASE_URL
const IDLE = Math.floor(numberEnv("RELIABILITY_IDLE_CONNECTIONS", 500))
const TRICKLE = Math.floor(numberEnv("RELIABILITY_TRICKLE_CONNECTIONS", 50))

const rssMb = (pid: number) => {
  const status = require("node:fs").readFileSync(`/proc/${pid}/status`, "utf8") as string
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024
}

interface Outcome {
  readonly name: string
  readonly status: number | "closed"
  readonly ok: boolean
  readonly detail: string
}

const main = async () => {
  const { databaseUrl } = await freshDatabase("tapedeck_hostile_")
  const server = await startServer(databaseUrl, { extraEnv: { TAPEDECK_MAX_BODY_BYTES: String(4 * 1024 * 1024) } })
  const { hostname, port } = new URL(server.url)
  const rssBefore = rssMb(server.pid)

  // Idle connections that never send a byte, and trickling ones that send a header byte every second.
  const sockets: Array<net.Socket> = []
  const open = () => {
    const s = net.connect(Number(port), hostname)
    s.on("error", () => {})
    sockets.push(s)
    return s
  }
  for (let i = 0; i < IDLE; i++) open()
  const trickle = Array.from({ length: TRICKLE }, () => {
    const s = open()
    s.write("POST /api/v1/traces HTTP/1.1\r\nHost: x\r\n")
    return s
  })
  let trickling = true
  const trickler = (async () => {
    while (trickling) {
      for (const s of trickle) if (!s.destroyed) s.write("X")
      await sleep(1000)
    }
  })()
  log(`${IDLE} idle and ${TRICKLE} trickling connections open`)

  // A well-behaved client throughout.
  const goodLatencies: Array<number> = []
  let goodFailures = 0
  let good = true
  const goodClient = (async () => {
    while (good) {
      for (const [path, init] of [
        ["/health", {}],
        ["/api/v1/traces?limit=5", { headers: { "x-service-key": KEY } }]
      ] as const) {
        const t0 = performance.now()
        try {
          const res = await fetch(`${server.url}${path}`, { ...init, signal: AbortSignal.timeout(10_000) })
          await res.arrayBuffer()
          if (res.status !== 200) goodFailures++
        } catch {
          goodFailures++
        }
        goodLatencies.push(performance.now() - t0)
      }
      await sleep(50)
    }
  })()

  const outcomes: Array<Outcome> = []
  const attempt = async (name: string, path: string, init: RequestInit) => {
    try {
      const res = await fetch(`${server.url}${path}`, { ...init, signal: AbortSignal.timeout(30_000) })
      const text = await res.text()
      let bodyOk = true
      if (res.headers.get("content-type")?.includes("json")) {
        try {
          const body = JSON.parse(text)
          bodyOk =
            typeof body.error === "string" && typeof body.code === "string" && typeof body.retryable === "boolean"
        } catch {
          bodyOk = false
        }
      }
      outcomes.push({
        name,
        status: res.status,
        ok: res.status >= 400 && res.status < 500 && bodyOk,
        detail: text.slice(0, 120)
      })
    } catch (e) {
      // The server closing the connection on a request it will not read is a refusal too.
      outcomes.push({ name, status: "closed", ok: true, detail: String(e).slice(0, 120) })
    }
  }
  const auth = { "x-service-key": KEY }
  const json = { ...auth, "content-type": "application/json" }
  const proto = { ...auth, "content-type": "application/x-protobuf" }
  const deep = (n: number) => "[".repeat(n) + "]".repeat(n)

  await attempt("JSON body of 64 MB (over the cap)", "/api/v1/traces", {
    method: "POST",
    headers: json,
    body: `{"x":"${"a".repeat(64 * 1024 * 1024)}"}`
  })
  await attempt("JSON nested 100,000 levels", "/api/v1/traces", { method: "POST", headers: json, body: deep(100_000) })
  await attempt("JSON nested 100,000 levels (OTLP)", "/v1/traces", {
    method: "POST",
    headers: json,
    body: `{"resourceSpans":${deep(100_000)}}`
  })
  await attempt("JSON of 2 million small array items", "/api/v1/traces", {
    method: "POST",
    headers: json,
    body: `[${"1,".repeat(1_999_999)}1]`
  })
  await attempt("truncated JSON", "/api/v1/traces", { method: "POST", headers: json, body: '{"id":"' })
  await attempt("truncated protobuf", "/v1/traces", {
    method: "POST",
    headers: proto,
    body: new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0x0f, 0x0a])
  })
  await attempt("protobuf with a length past the end", "/v1/traces", {
    method: "POST",
    headers: proto,
    body: new Uint8Array([0x0a, 0x80, 0x80, 0x80, 0x01, 0x12])
  })
  await attempt("random bytes as protobuf", "/v1/traces", {
    method: "POST",
    headers: proto,
    body: crypto.getRandomValues(new Uint8Array(65536))
  })
  const bomb = gzipSync(Buffer.alloc(512 * 1024 * 1024))
  await attempt(`gzip bomb (${(bomb.length / 1024).toFixed(0)} KB → 512 MB)`, "/v1/traces", {
    method: "POST",
    headers: { ...proto, "content-encoding": "gzip" },
    body: bomb
  })
  await attempt("gzip bomb as JSON", "/v1/traces", {
    method: "POST",
    headers: { ...json, "content-encoding": "gzip" },
    body: bomb
  })
  await attempt("a corrupt gzip body", "/v1/traces", {
    method: "POST",
    headers: { ...json, "content-encoding": "gzip" },
    body: new Uint8Array([0x1f, 0x8b, 8, 0, 1, 2, 3])
  })
  await attempt("an unknown content-encoding", "/v1/traces", {
    method: "POST",
    headers: { ...json, "content-encoding": "br2" },
    body: "{}"
  })
  await attempt("a 64 KB header", "/api/v1/traces", { headers: { ...auth, "x-filler": "a".repeat(64 * 1024) } })
  await attempt("a 1 MB header", "/api/v1/traces", { headers: { ...auth, "x-filler": "a".repeat(1024 * 1024) } })
  await attempt("200 headers", "/api/v1/traces", {
    headers: { ...auth, ...Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`x-h${i}`, "v"])) }
  })
  await attempt("a 100 KB URL", `/api/v1/traces?cursor=${"a".repeat(100_000)}`, { headers: auth })
  await attempt("a wrong content type", "/api/v1/traces", {
    method: "POST",
    headers: { ...auth, "content-type": "text/xml" },
    body: "<a/>"
  })

  // Raw framing the fetch client would not send.
  const raw = (name: string, bytes: string) =>
    new Promise<void>((resolve) => {
      const s = net.connect(Number(port), hostname)
      let reply = ""
      const done = () => {
        const status = /^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1]
        outcomes.push(
          status === undefined
            ? { name, status: "closed", ok: true, detail: reply.slice(0, 80) }
            : {
                name,
                status: Number(status),
                ok: Number(status) >= 400 && Number(status) < 500,
                detail: reply.slice(0, 120)
              }
        )
        resolve()
      }
      s.setTimeout(15_000, () => s.destroy())
      s.on("data", (d) => {
        reply += d.toString()
        if (/^HTTP\/1\.1 \d{3}/.test(reply)) s.destroy()
      })
      s.on("close", done)
      s.on("error", () => {})
      s.write(bytes)
    })
  await raw(
    "a Content-Length larger than the body, then silence",
    "POST /api/v1/traces HTTP/1.1\r\nHost: x\r\nx-service-key: " +
      KEY +
      '\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"id":'
  )
  await raw("a negative Content-Length", "POST /api/v1/traces HTTP/1.1\r\nHost: x\r\ncontent-length: -5\r\n\r\n")
  await raw(
    "a malformed chunked body",
    "POST /api/v1/traces HTTP/1.1\r\nHost: x\r\nx-service-key: " +
      KEY +
      "\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
  )
  await raw("a request line of garbage", "\x00\x01\x02 GARBAGE\r\n\r\n")

  good = false
  trickling = false
  await Promise.all([goodClient, trickler])
  const rssAfter = rssMb(server.pid)
  for (const s of sockets) s.destroy()

  const problems = outcomes.filter((o) => !o.ok).map((o) => `${o.name}: ${o.status} ${o.detail}`)
  if (goodFailures > 0) problems.push(`${goodFailures} of the well-behaved client's calls failed`)
  const stats = latencyStats(goodLatencies)
  console.log(
    [
      "| hostile request | answer |",
      "|---|---|",
      ...outcomes.map((o) => `| ${o.name} | ${o.status}${o.ok ? "" : " ✗"} |`),
      "",
      "| while it ran | value |",
      "|---|---|",
      `| idle / trickling connections held | ${IDLE} / ${TRICKLE} |`,
      `| well-behaved calls: count / failed | ${goodLatencies.length} / ${goodFailures} |`,
      `| well-behaved latency p50 / p99 / max | ${stats.p50.toFixed(1)} / ${stats.p99.toFixed(1)} / ${Math.max(...goodLatencies).toFixed(1)} ms |`,
      `| server RSS before / after | ${rssBefore.toFixed(0)} / ${rssAfter.toFixed(0)} MB |`
    ].join("\n")
  )
  if (problems.length > 0) throw new Error(`hostile-client suite failed:\n- ${problems.join("\n- ")}`)
  log("hostile-client suite passed")
}

await runBench(main)
