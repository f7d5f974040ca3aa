import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { BunContext } from "@effect/platform-bun"
import { ConfigProvider, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { CheckPressure } from "#layers/enforcement/CheckPressure"
import { ClusterPressureLive } from "#layers/enforcement/ClusterPressure"
import { backgroundHeld } from "#layers/jobs/Foreground"
import { EventLoopLag } from "#layers/platform/EventLoopLag"
import { StorageLive } from "#layers/storage/Sql"
import { createTestDatabase, type TestDatabase } from "../support/Database.ts"
import { until } from "../support/Until.ts"

const eventually = (what: string, holds: () => boolean) => until(async () => (holds() ? true : undefined), what, 3000)

/**
 * Two instances over one database, each its own CheckPressure (over an event loop whose lag is `lag.ms`) with
 * ClusterPressure beside it, as each instance's AppLive builds them.
 */
const instance = (env: Record<string, string>, lag: { ms: number }) => {
  const pressure = CheckPressure.DefaultWithoutDependencies.pipe(
    Layer.provide(Layer.succeed(EventLoopLag, EventLoopLag.make({ recentMs: () => lag.ms })))
  )
  const runtime = ManagedRuntime.make(
    Layer.provideMerge(ClusterPressureLive, pressure).pipe(
      Layer.provide(StorageLive),
      Layer.provide(BunContext.layer),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Error)),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
    )
  )
  disposers.push(() => runtime.dispose())
  return { pressure: () => runtime.runPromise(CheckPressure) }
}

let database: TestDatabase
const disposers: Array<() => Promise<void>> = []
beforeAll(async () => {
  database = await createTestDatabase()
})
afterAll(async () => {
  for (const dispose of disposers) await dispose()
  await database.drop()
})

const env = () => ({
  ...database.env,
  TAPEDECK_ENFORCEMENT_SHED_INGEST_MS: "10",
  TAPEDECK_ENFORCEMENT_SHED_INGEST_LAG_MS: "5"
})

describe.skipIf(!process.env.TEST_DATABASE_URL)("ClusterPressure (PostgreSQL)", () => {
  // First, while no other instance of this process listens (they would hold this process's background work too).
  test("an instance whose checks keep waiting holds its own background work as well (the job worker, the purge)", async () => {
    const px = await instance(env(), { ms: 0 }).pressure()
    await eventually("no hold left by earlier tests", () => !backgroundHeld())
    for (let i = 0; i < 16; i++) px.observe(500)
    await eventually("its background work held", () => backgroundHeld())
    await eventually("the hold to end with the pressure", () => !backgroundHeld())
  }, 30_000)

  test("checks kept waiting on one instance make the others refuse exports; its late loop narrows theirs", async () => {
    const lagX = { ms: 0 }
    const x = instance(env(), lagX)
    const y = instance(env(), { ms: 0 })
    const [px, py] = [await x.pressure(), await y.pressure()]

    // X's checks keep waiting for a lane: Y refuses every export, and does not say it on (no echo).
    for (let i = 0; i < 16; i++) px.observe(500)
    expect(px.pressedHere()).toBe("lanes")
    await eventually("Y refusing exports", () => py.active())
    expect(py.loopLate(false)).toBe(false)
    expect(py.pressedHere()).toBeUndefined()
    // X's own shed ends after a second, and nothing it said came back to it.
    await eventually("X's own shed to end", () => !px.active())
    // Nothing said any more: Y's hold ends too.
    await eventually("Y's hold to end", () => !py.active())

    // X's checks come by the hundred a second behind a late loop: Y narrows what it admits, refusing not all.
    for (let i = 0; i < 100; i++) px.observe(0)
    lagX.ms = 20
    expect(px.pressedHere()).toBe("loop")
    await eventually("Y narrowing its exports", () => py.loopLate(false))
    expect(py.active()).toBe(false)
    lagX.ms = 0
    await eventually("Y's narrowing to end", () => !py.loopLate(false))
  }, 30_000)

  test("a few slow checks on one instance say nothing to the others", async () => {
    const x = instance(env(), { ms: 0 })
    const y = instance(env(), { ms: 0 })
    const [px, py] = [await x.pressure(), await y.pressure()]
    for (let i = 0; i < 15; i++) px.observe(500)
    expect(px.pressedHere()).toBeUndefined()
    await Bun.sleep(600)
    expect(py.active()).toBe(false)
    expect(py.loopLate(false)).toBe(false)
  }, 30_000)
})

describe.skipIf(!!process.env.TEST_DATABASE_URL)("ClusterPressure (embedded PGlite)", () => {
  test("one process: nothing is said, and a pressed instance still sheds its own ingestion", async () => {
    const x = instance(env(), { ms: 0 })
    const px = await x.pressure()
    for (let i = 0; i < 16; i++) px.observe(500)
    expect(px.pressedHere()).toBe("lanes")
    expect(px.active()).toBe(true)
  }, 30_000)
})
