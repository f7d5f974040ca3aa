import { describe, expect, test } from "bun:test"
import { ConfigProvider, Effect, Layer } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { CheckPressure } from "#layers/enforcement/CheckPressure"
import { EventLoopLag } from "#layers/platform/EventLoopLag"

const withEnv = (env: Record<string, string>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const shedMs = (env: Record<string, string>) =>
  Effect.runSync(
    Effect.map(AppConfig, (c) => c.enforcementShedIngestMs).pipe(
      Effect.provide(AppConfig.Default),
      Effect.provide(withEnv(env))
    )
  )

const pressure = (env: Record<string, string>) =>
  Effect.runSync(CheckPressure.pipe(Effect.provide(CheckPressure.Default), Effect.provide(withEnv(env))))

/** CheckPressure over an event loop whose lag is whatever `lag.ms` says at the moment it is asked. */
const pressureWithLag = (env: Record<string, string>, lag: { ms: number }) =>
  Effect.runSync(
    CheckPressure.pipe(
      Effect.provide(
        CheckPressure.DefaultWithoutDependencies.pipe(
          Layer.provide(Layer.succeed(EventLoopLag, EventLoopLag.make({ recentMs: () => lag.ms }))),
          Layer.provide(AppConfig.Default)
        )
      ),
      Effect.provide(withEnv(env))
    )
  )

const lagLimit = (env: Record<string, string>) =>
  Effect.runSync(
    Effect.map(AppConfig, (c) => c.enforcementShedIngestLagMs).pipe(
      Effect.provide(AppConfig.Default),
      Effect.provide(withEnv(env))
    )
  )

describe("CheckPressure", () => {
  test("the threshold: a fifth of the check deadline on PostgreSQL, off on embedded PGlite, as set when set", () => {
    expect(shedMs({ DATABASE_URL: "postgres://x/y" })).toBe(50)
    expect(shedMs({ DATABASE_URL: "postgres://x/y", TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "1000" })).toBe(200)
    expect(shedMs({})).toBe(0)
    expect(shedMs({ TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "7" })).toBe(7)
    expect(shedMs({ DATABASE_URL: "postgres://x/y", TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "0" })).toBe(0)
  })

  test("a few slow checks shed nothing; sustained slow checks do; slow ones among many prompt ones do not", () => {
    const few = pressure({ TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "10" })
    for (let i = 0; i < 15; i++) few.observe(500)
    expect(few.active()).toBe(false)
    few.observe(500)
    expect(few.active()).toBe(true)

    const mixed = pressure({ TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "10" })
    for (let i = 0; i < 40; i++) mixed.observe(0)
    for (let i = 0; i < 30; i++) mixed.observe(500)
    expect(mixed.active()).toBe(false)

    const off = pressure({})
    for (let i = 0; i < 100; i++) off.observe(10_000)
    expect(off.active()).toBe(false)
  })

  test("the event loop's limit: 2 ms on PostgreSQL, off on embedded PGlite, as set when set", () => {
    expect(lagLimit({ DATABASE_URL: "postgres://x/y" })).toBe(2)
    expect(lagLimit({})).toBe(0)
    expect(lagLimit({ TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "2.5" })).toBe(2.5)
    expect(lagLimit({ DATABASE_URL: "postgres://x/y", TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "0" })).toBe(0)
  })

  test("the loop is late for checks only while checks come and its lag is over the limit", () => {
    const lag = { ms: 20 }
    const env = { TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "5" }
    const late = pressureWithLag(env, lag)
    // No checks, or an account's few: a late loop is not theirs to protect.
    expect(late.loopLate(false)).toBe(false)
    for (let i = 0; i < 99; i++) late.observe(0)
    expect(late.loopLate(false)).toBe(false)
    late.observe(0)
    expect(late.loopLate(false)).toBe(true)
    // Lane-wise nothing is wrong: all exports are not refused.
    expect(late.active()).toBe(false)
    lag.ms = 4
    expect(late.loopLate(false)).toBe(false)
    // While exports come faster than they are taken, half the limit.
    expect(late.loopLate(true)).toBe(true)
    lag.ms = 2.5
    expect(late.loopLate(true)).toBe(false)

    const off = pressureWithLag({ TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "0" }, { ms: 1000 })
    for (let i = 0; i < 100; i++) off.observe(0)
    expect(off.loopLate(false)).toBe(false)
    expect(off.loopLate(true)).toBe(false)
  })

  test("pressedHere says what keeps this instance's own checks waiting, and never what another instance said", () => {
    const lag = { ms: 0 }
    const env = { TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "10", TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "5" }
    const heard = pressureWithLag(env, lag)
    expect(heard.pressedHere()).toBeUndefined()
    heard.pressedElsewhere("lanes", Date.now() + 10_000)
    heard.pressedElsewhere("loop", Date.now() + 10_000)
    // Taken as its own: every export refused, and the loop counted late, whatever this instance's checks do.
    expect(heard.active()).toBe(true)
    expect(heard.loopLate(false)).toBe(true)
    // But not said again: what another instance said would echo between them for ever.
    expect(heard.pressedHere()).toBeUndefined()

    const lanes = pressureWithLag(env, lag)
    for (let i = 0; i < 16; i++) lanes.observe(500)
    expect(lanes.pressedHere()).toBe("lanes")

    const loop = pressureWithLag(env, lag)
    for (let i = 0; i < 100; i++) loop.observe(0)
    expect(loop.pressedHere()).toBeUndefined()
    lag.ms = 6
    expect(loop.pressedHere()).toBe("loop")
    // The lanes come first: every export refused says more than fewer admitted.
    for (let i = 0; i < 100; i++) loop.observe(500)
    expect(loop.pressedHere()).toBe("lanes")
  })

  test("another instance's pressure is not heeded where its rule is off", () => {
    const off = pressureWithLag({ TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "0" }, { ms: 0 })
    expect(off.pressedElsewhere("lanes", Date.now() + 10_000)).toBe(false) // off on embedded PGlite by default
    expect(off.pressedElsewhere("loop", Date.now() + 10_000)).toBe(false)
    expect(off.active()).toBe(false)
    expect(off.loopLate(false)).toBe(false)
    const on = pressureWithLag(
      { TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "10", TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "5" },
      { ms: 0 }
    )
    expect(on.pressedElsewhere("lanes", Date.now() + 10_000)).toBe(true)
    expect(on.pressedElsewhere("loop", Date.now() + 10_000)).toBe(true)
  })

  test("another instance's pressure holds until the time it came with", async () => {
    const heard = pressureWithLag(
      { TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "10", TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "5" },
      { ms: 0 }
    )
    heard.pressedElsewhere("lanes", Date.now() + 60)
    heard.pressedElsewhere("lanes", Date.now() + 20) // an earlier end does not shorten it
    expect(heard.active()).toBe(true)
    expect(heard.loopLate(false)).toBe(false)
    await Bun.sleep(80)
    expect(heard.active()).toBe(false)
    heard.pressedElsewhere("loop", Date.now() + 60)
    expect(heard.loopLate(false)).toBe(true)
    expect(heard.active()).toBe(false)
    await Bun.sleep(80)
    expect(heard.loopLate(false)).toBe(false)
  })

  test("checks a second old no longer count", async () => {
    const late = pressureWithLag({ TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "5" }, { ms: 50 })
    for (let i = 0; i < 100; i++) late.observe(0)
    expect(late.loopLate(false)).toBe(true)
    await Bun.sleep(1150)
    expect(late.loopLate(false)).toBe(false)
  })
})

describe("EventLoopLag", () => {
  test("a loop blocked for 60 ms reports it at once; one kept busy in 8 ms tasks reports it as it goes; a free one little", async () => {
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const loop = yield* EventLoopLag
          const busy = (ms: number) => {
            const until = performance.now() + ms
            while (performance.now() < until) {}
          }
          // The first question starts the sampling.
          expect(loop.recentMs()).toBe(0)
          yield* Effect.promise(() => Bun.sleep(150))
          // A busy test machine's timers run a little late.
          expect(loop.recentMs()).toBeLessThan(25)
          busy(60)
          expect(loop.recentMs()).toBeGreaterThanOrEqual(50)
          yield* Effect.promise(async () => {
            const until = performance.now() + 200
            while (performance.now() < until) {
              busy(8)
              await new Promise((resolve) => setTimeout(resolve, 0))
            }
          })
          expect(loop.recentMs()).toBeGreaterThan(2)
        })
      ).pipe(Effect.provide(EventLoopLag.Default))
    )
  })
})
