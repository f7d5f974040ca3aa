import { describe, expect, test } from "bun:test"
import { ConfigProvider, Deferred, Effect, FastCheck as fc, Fiber, Layer } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { CheckPressure } from "#layers/enforcement/CheckPressure"
import { CurrentUploadPermit, IngestGate } from "#layers/ingest/IngestGate"
import { IngestPermits, type Permit } from "#layers/ingest/IngestPermits"

const withGate = <A, E>(maxInflight: number, body: (gate: IngestGate) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    Effect.scoped(Effect.flatMap(IngestGate, body)).pipe(
      Effect.provide(
        IngestGate.Default.pipe(
          Layer.provide(
            Layer.setConfigProvider(
              ConfigProvider.fromMap(new Map([["TAPEDECK_INGEST_MAX_INFLIGHT", String(maxInflight)]]))
            )
          )
        )
      )
    )
  )

/**
 * A gate over checks that never wait for a lane, whose event loop is late for them while `late.now` says so; `asked`
 * records whether the gate said exports exceed what it takes, each time it asked.
 */
const withLateLoop = <A, E>(
  maxInflight: number,
  late: { now: boolean },
  body: (gate: IngestGate) => Effect.Effect<A, E>,
  asked: Array<boolean> = []
) =>
  Effect.runPromise(
    Effect.scoped(Effect.flatMap(IngestGate, body)).pipe(
      Effect.provide(
        IngestGate.DefaultWithoutDependencies.pipe(
          Layer.provide(
            Layer.succeed(
              CheckPressure,
              CheckPressure.make({
                observe: () => {},
                active: () => false,
                pressedHere: () => undefined,
                pressedElsewhere: () => false,
                loopLate: (exportsExceed) => {
                  asked.push(exportsExceed)
                  return late.now
                }
              })
            )
          ),
          Layer.provide(AppConfig.Default),
          Layer.provide(
            Layer.setConfigProvider(
              ConfigProvider.fromMap(new Map([["TAPEDECK_INGEST_MAX_INFLIGHT", String(maxInflight)]]))
            )
          )
        )
      )
    )
  )

describe("IngestGate", () => {
  test("while checks wait behind a late event loop, exports admitted at once are halved down to one, then grow back", async () => {
    const late = { now: true }
    await withLateLoop(8, late, (gate) =>
      Effect.gen(function* () {
        const hold = yield* Deferred.make<void>()
        const admitted = []
        for (let i = 0; i < 4; i++) admitted.push(yield* Effect.fork(gate.guard(`a${i}`, Deferred.await(hold))))
        yield* Effect.sleep("10 millis")
        for (let i = 0; i < 4; i++) expect(gate.heldBy(`a${i}`)).toBe(1)
        const refused = yield* Effect.flip(gate.guard("b", Effect.void))
        expect(refused).toMatchObject({ _tag: "IngestSaturated", by: "checks" })
        expect(gate.admits("b")).toBe(false)
        expect(gate.shedForChecks()).toBe(true)
        // Two more late steps: one at a time, and never none.
        for (let step = 0; step < 2; step++) {
          yield* Effect.sleep("110 millis")
          expect(gate.admits("b")).toBe(false)
        }
        yield* Deferred.succeed(hold, undefined)
        for (const fiber of admitted) yield* Fiber.join(fiber)
        const one = yield* Deferred.make<void>()
        const only = yield* Effect.fork(gate.guard("b", Deferred.await(one)))
        yield* Effect.sleep("10 millis")
        expect(gate.heldBy("b")).toBe(1)
        expect(gate.admits("c")).toBe(false)
        // The loop catches up: one more a step.
        late.now = false
        yield* Effect.sleep("110 millis")
        expect(gate.admits("c")).toBe(true)
        yield* Deferred.succeed(one, undefined)
        yield* Fiber.join(only)
      })
    )
  })

  test("the event loop's limit is asked for half its lateness once more exports were refused than admitted in a second", async () => {
    const asked: Array<boolean> = []
    await withLateLoop(
      1,
      { now: false },
      (gate) =>
        Effect.gen(function* () {
          const hold = yield* Deferred.make<void>()
          const held = yield* Effect.fork(gate.guard("a", Deferred.await(hold)))
          yield* Effect.sleep("10 millis")
          // One admitted: nine refusals are a burst, the tenth makes more refused than admitted.
          for (let i = 0; i < 9; i++) yield* Effect.flip(gate.guard("b", Effect.void))
          yield* Effect.sleep("110 millis")
          gate.admits("b")
          expect(asked.at(-1)).toBe(false)
          yield* Effect.flip(gate.guard("b", Effect.void))
          yield* Effect.sleep("110 millis")
          gate.admits("b")
          expect(asked.at(-1)).toBe(true)
          // A second later those refusals no longer count.
          yield* Deferred.succeed(hold, undefined)
          yield* Fiber.join(held)
          yield* Effect.sleep("1100 millis")
          gate.admits("b")
          expect(asked.at(-1)).toBe(false)
        }),
      asked
    )
  })

  test("guard admits up to the bound, refuses past it, and frees the permit when the guarded work ends or is interrupted", async () => {
    await withGate(2, (gate) =>
      Effect.gen(function* () {
        const hold = yield* Deferred.make<void>()
        const first = yield* Effect.fork(gate.guard("a", Deferred.await(hold)))
        const second = yield* Effect.fork(gate.guard("a", Deferred.await(hold)))
        yield* Effect.yieldNow()
        expect(gate.saturated()).toBe(true)
        const refused = yield* Effect.flip(gate.guard("a", Effect.void))
        expect(refused._tag).toBe("IngestSaturated")
        yield* Fiber.interrupt(first)
        expect(gate.saturated()).toBe(false)
        yield* Deferred.succeed(hold, undefined)
        yield* Fiber.join(second)
        expect(gate.saturated()).toBe(false)
        yield* gate.guard("a", Effect.void)
      })
    )
  })

  test("an account under its fair share takes back a permit of another account's upload, whose reader is told", async () => {
    await withGate(2, (gate) =>
      Effect.gen(function* () {
        const hold = yield* Deferred.make<void>()
        const told: Array<string> = []
        // An upload that never finishes receiving its body, listening for preemption as the body reader does.
        const upload = (name: string) =>
          gate.guard(
            "b",
            Effect.flatMap(CurrentUploadPermit, (permit) => {
              permit.onPreempt(() => told.push(name))
              return Deferred.await(hold)
            })
          )
        const uploads = [yield* Effect.fork(upload("first")), yield* Effect.fork(upload("second"))]
        yield* Effect.yieldNow()
        expect(gate.admits("b")).toBe(false)
        expect(gate.admits("a")).toBe(true)
        const admitted = yield* Effect.fork(gate.guard("a", Deferred.await(hold)))
        yield* Effect.yieldNow()
        expect(told).toEqual(["first"])
        expect(gate.heldBy("a")).toBe(1)
        expect(gate.heldBy("b")).toBe(1)
        // Both now hold their share: nobody takes anything back.
        expect(gate.admits("a")).toBe(false)
        expect(gate.admits("b")).toBe(false)
        expect(gate.admits("c")).toBe(false)
        yield* Deferred.succeed(hold, undefined)
        yield* Fiber.join(admitted)
        for (const f of uploads) yield* Fiber.join(f)
        expect(gate.saturated()).toBe(false)
        expect(gate.heldBy("b")).toBe(0)
      })
    )
  })

  test("an upload whose body has arrived is never taken back", async () => {
    await withGate(1, (gate) =>
      Effect.gen(function* () {
        const hold = yield* Deferred.make<void>()
        yield* Effect.fork(
          gate.guard(
            "b",
            Effect.flatMap(CurrentUploadPermit, (permit) => {
              permit.uploaded()
              return Deferred.await(hold)
            })
          )
        )
        yield* Effect.yieldNow()
        expect(gate.admits("a")).toBe(false)
        expect((yield* Effect.flip(gate.guard("a", Effect.void)))._tag).toBe("IngestSaturated")
        yield* Deferred.succeed(hold, undefined)
      })
    )
  })
})

type Op =
  | { readonly kind: "ask"; readonly account: number }
  | { readonly kind: "uploaded"; readonly pick: number }
  | { readonly kind: "release"; readonly pick: number }

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("ask" as const), account: fc.integer({ min: 0, max: 4 }) }),
  fc.record({ kind: fc.constant("uploaded" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("release" as const), pick: fc.nat() })
)

describe("IngestPermits (property)", () => {
  test("over any interleaving: the bound holds, a free permit is never refused, and only an over-share upload is taken back for an under-share asker", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(op, { maxLength: 200 }), (max, ops) => {
        const permits = new IngestPermits(max)
        const live: Array<Permit> = []
        for (const o of ops) {
          if (o.kind === "ask") {
            const asker = `acct${o.account}`
            const before = new Map(permits.holders.map((a) => [a, permits.heldBy(a)] as const))
            const uploadingBefore = new Map(live.map((p) => [p, p.uploading] as const))
            const share = permits.fairShare(asker)
            const wasFull = permits.inUse >= max
            const granted = permits.ask(asker)
            if (!wasFull) expect(granted?.preempted).toBeUndefined()
            if (!wasFull) expect(granted).toBeDefined()
            if (granted === undefined) {
              // Refused only when full and nothing may be taken back for this asker.
              expect(wasFull).toBe(true)
              const underShare = (before.get(asker) ?? 0) < share
              const takeable = live.some(
                (p) => p.accountId !== asker && p.uploading && (before.get(p.accountId) ?? 0) > share
              )
              expect(underShare && takeable).toBe(false)
            } else {
              if (granted.preempted !== undefined) {
                const victim = granted.preempted
                expect(victim.accountId).not.toBe(asker)
                expect(uploadingBefore.get(victim)).toBe(true)
                expect(before.get(victim.accountId)!).toBeGreaterThan(share)
                expect(before.get(asker) ?? 0).toBeLessThan(share)
                expect(victim.preempted).toBe(true)
                live.splice(live.indexOf(victim), 1)
              }
              live.push(granted.permit)
            }
          } else if (live.length > 0) {
            const permit = live[o.pick % live.length]!
            if (o.kind === "uploaded") permits.uploaded(permit)
            else {
              permits.release(permit)
              permits.release(permit) // twice is harmless
              live.splice(live.indexOf(permit), 1)
            }
          }
          expect(permits.inUse).toBe(live.length)
          expect(permits.inUse).toBeLessThanOrEqual(max)
          expect(permits.holders.reduce((n, a) => n + permits.heldBy(a), 0)).toBe(live.length)
          expect(permits.admits("probe")).toBe(permits.inUse < max || permits.victimFor("probe") !== undefined)
        }
      }),
      { numRuns: 300 }
    )
  })

  test("an account that keeps asking while another holds every permit with uploads ends up with its fair share", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 16 }), (max) => {
        const permits = new IngestPermits(max)
        for (let i = 0; i < max; i++) permits.ask("hog")
        let got = 0
        while (permits.ask("victim") !== undefined) got++
        expect(got).toBe(Math.floor(max / 2))
        expect(permits.heldBy("hog")).toBe(max - got)
      })
    )
  })
})
