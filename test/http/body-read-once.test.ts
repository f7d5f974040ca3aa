import { describe, expect, test } from "bun:test"
import { HttpServerRequest } from "@effect/platform"
import { Effect, FastCheck as fc } from "effect"
import { type BodyPace, limitBody } from "#src/http/BodyLimit"

const pace: BodyPace = { deadlineMs: 10_000, graceMs: 1_000, minBytesPerSecond: 0 }

/** A request whose body arrives as a stream (no Content-Length), so `limitBody` reads it on its paced path. */
const streamed = (text: string) => {
  const bytes = new TextEncoder().encode(text)
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      // Two chunks when it can: the read gathers them.
      const half = bytes.byteLength >> 1
      if (half > 0) controller.enqueue(bytes.slice(0, half))
      controller.enqueue(bytes.slice(half))
      controller.close()
    }
  })
  return HttpServerRequest.fromWeb(
    new Request("http://localhost/api/v1/enforcement/check", {
      method: "POST",
      headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
      body
    })
  )
}

describe("a request body is read once, whatever reads it", () => {
  test("text, json and arrayBuffer, one after another and all at once, give the same body", async () => {
    await fc.assert(
      fc.asyncProperty(fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 40 })), async (value) => {
        const text = JSON.stringify(value)
        const limited = await Effect.runPromise(limitBody(streamed(text), 1_000_000, pace))
        const sequential = await Effect.runPromise(
          Effect.all([limited.text, limited.json, limited.arrayBuffer, limited.text])
        )
        expect(sequential[0]).toBe(text)
        expect(sequential[1]).toEqual(value)
        expect(new TextDecoder().decode(sequential[2])).toBe(text)
        expect(sequential[3]).toBe(text)

        const again = await Effect.runPromise(limitBody(streamed(text), 1_000_000, pace))
        const concurrent = await Effect.runPromise(
          Effect.all([again.json, again.text, again.arrayBuffer], { concurrency: "unbounded" })
        )
        expect(concurrent[0]).toEqual(value)
        expect(concurrent[1]).toBe(text)
        expect(new TextDecoder().decode(concurrent[2])).toBe(text)
      }),
      { numRuns: 50 }
    )
  })

  test("a body over the limit fails every read the same way", async () => {
    const limited = await Effect.runPromise(limitBody(streamed("x".repeat(100)), 10, pace))
    const first = await Effect.runPromise(Effect.flip(limited.text))
    const second = await Effect.runPromise(Effect.flip(limited.json))
    expect(first._tag).toBe("RequestError")
    expect(String((first as { cause?: unknown }).cause)).toContain("exceeds the limit of 10 bytes")
    expect(second).toBe(first)
  })
})
