import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { KEY_A, startTestServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
beforeAll(async () => {
  server = await startTestServer()
})
afterAll(() => server.stop())

const post = (path: string, contentType: string, body: string | Uint8Array, key: string | undefined = KEY_A) =>
  fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": contentType, ...(key === undefined ? {} : { "x-service-key": key }) },
    body
  })

/** The two fields of a google.rpc.Status: code (field 1, varint) and message (field 2, string). */
const readStatus = (bytes: Uint8Array) => {
  expect(bytes[0]).toBe(0x08)
  const code = bytes[1]
  expect(bytes[2]).toBe(0x12)
  let length = 0
  let shift = 0
  let i = 3
  for (;;) {
    const b = bytes[i++]!
    length |= (b & 0x7f) << shift
    shift += 7
    if ((b & 0x80) === 0) break
  }
  expect(i + length).toBe(bytes.length)
  return { code, message: new TextDecoder().decode(bytes.slice(i, i + length)) }
}

describe("OTLP logs and metrics: a final refusal, the same whatever the encoding", () => {
  for (const [path, signal] of [
    ["/v1/logs", "logs"],
    ["/v1/metrics", "metrics"]
  ] as const) {
    test(`${path}: 404 (not retried by exporters) with the reason, JSON or protobuf alike`, async () => {
      const json = await post(path, "application/json", JSON.stringify({ resourceLogs: [] }))
      expect(json.status).toBe(404)
      const body = (await json.json()) as any
      expect(body).toMatchObject({ code: "otlp_signal_not_supported", retryable: false })
      expect(body.error).toContain(`OTLP ${signal} are not accepted`)

      for (const contentType of ["application/x-protobuf", "application/protobuf"]) {
        const proto = await post(path, contentType, new Uint8Array([0x0a, 0x02, 0x0a, 0x00]))
        expect(proto.status).toBe(404)
        expect(proto.headers.get("content-type")).toBe("application/x-protobuf")
        const status = readStatus(new Uint8Array(await proto.arrayBuffer()))
        expect(status.code).toBe(12)
        expect(status.message).toBe(body.error)
      }
      // Any other body, unreadable JSON or no credentials: the same answer, never a 400 or 401 an exporter might misread.
      expect((await post(path, "application/json", "{not json")).status).toBe(404)
      expect((await post(path, "text/plain", "x", undefined)).status).toBe(404)
    })
  }

  test("traces are still received at /v1/traces", async () => {
    const response = await post("/v1/traces", "application/json", JSON.stringify({ resourceSpans: [] }))
    expect(response.status).toBe(200)
  })
})
