import { describe, expect, test } from "bun:test"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { ConfigProvider, Deferred, Effect, Fiber, Layer } from "effect"
import { IngestGate } from "#layers/ingest/IngestGate"
import { refuseWhileSaturated } from "#src/http/IngestGateMiddleware"

const withGate = <A, E>(maxInflight: number, body: (gate: IngestGate) => Effect.Effect<A, E>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(IngestGate, body)).pipe(
    Effect.provide(IngestGate.Default.pipe(
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["TAPEDECK_INGEST_MAX_INFLIGHT", String(maxInflight)]]))))
    ))
  ))

const requestTo = (method: string, path: string) =>
  HttpServerRequest.fromWeb(new Request(`http://tapedeck.test${path}`, method === "POST" ? { method, body: "{}" } : { method }))

/** Runs the fast path over an app that answers 200 and counts its calls. */
const answer = (gate: IngestGate, request: HttpServerRequest.HttpServerRequest) => {
  let reached = 0
  const app = Effect.sync(() => {
    reached++
    return HttpServerResponse.text("app")
  })
  return refuseWhileSaturated(gate)(app).pipe(
    Effect.provideService(HttpServerRequest.HttpServerRequest, request),
    Effect.map((response) => ({ response, reached }))
  )
}

describe("IngestGate", () => {
  test("guard admits up to the bound, refuses past it, and frees the permit when the guarded work ends or is interrupted", async () => {
    await withGate(2, (gate) =>
      Effect.gen(function*() {
        const hold = yield* Deferred.make<void>()
        const first = yield* Effect.fork(gate.guard(Deferred.await(hold)))
        const second = yield* Effect.fork(gate.guard(Deferred.await(hold)))
        yield* Effect.yieldNow()
        expect(gate.saturated()).toBe(true)
        const refused = yield* Effect.flip(gate.guard(Effect.void))
        expect(refused._tag).toBe("IngestSaturated")
        yield* Fiber.interrupt(first)
        expect(gate.saturated()).toBe(false)
        yield* Deferred.succeed(hold, undefined)
        yield* Fiber.join(second)
        expect(gate.saturated()).toBe(false)
        yield* gate.guard(Effect.void)
      }))
  })

  test("the server-level fast path answers exports with the backpressure 503 while saturated, and nothing else", async () => {
    await withGate(1, (gate) =>
      Effect.gen(function*() {
        const idle = yield* answer(gate, requestTo("POST", "/v1/traces"))
        expect(idle.reached).toBe(1)

        const hold = yield* Deferred.make<void>()
        yield* Effect.fork(gate.guard(Deferred.await(hold)))
        yield* Effect.yieldNow()

        const refused = yield* answer(gate, requestTo("POST", "/v1/traces?x=1"))
        expect(refused.reached).toBe(0)
        expect(refused.response.status).toBe(503)
        expect(refused.response.headers["retry-after"]).toBe("1")
        const body = JSON.parse(new TextDecoder().decode((refused.response.body as { body: Uint8Array }).body))
        expect(body).toEqual({ error: "ingestion is saturated (1 exports in flight); retry after 1 s", code: "ingest_backpressure", retryable: true })

        for (const [method, path] of [["GET", "/v1/traces"], ["POST", "/api/v1/traces"], ["POST", "/v1/traces/x"]] as const) {
          expect((yield* answer(gate, requestTo(method, path))).reached).toBe(1)
        }

        yield* Deferred.succeed(hold, undefined)
        yield* Effect.sleep("10 millis")
        expect((yield* answer(gate, requestTo("POST", "/v1/traces"))).reached).toBe(1)
      }))
  })
})
