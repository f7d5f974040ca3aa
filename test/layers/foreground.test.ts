import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { enterForeground, holdBackground, leaveForeground, yieldToForeground } from "#layers/jobs/Foreground"

const timed = async (maxWaitMs: number) => {
  const started = performance.now()
  await Effect.runPromise(yieldToForeground(maxWaitMs))
  return performance.now() - started
}

describe("Foreground", () => {
  test("background work goes on at once when nothing is in flight and nothing holds it", async () => {
    expect(await timed(1000)).toBeLessThan(20)
  })

  test("a hold (another instance's checks keep waiting) keeps background work waiting until it ends", async () => {
    holdBackground(Date.now() + 80)
    holdBackground(Date.now() + 10) // an earlier end does not shorten it
    const waited = await timed(1000)
    expect(waited).toBeGreaterThanOrEqual(75)
    expect(waited).toBeLessThan(400)
  })

  test("but never longer than the caller's limit, as for requests in flight", async () => {
    holdBackground(Date.now() + 300)
    const held = await timed(50)
    expect(held).toBeGreaterThanOrEqual(45)
    expect(held).toBeLessThan(250)
    await Bun.sleep(300)
    enterForeground()
    try {
      const busy = await timed(50)
      expect(busy).toBeGreaterThanOrEqual(45)
      expect(busy).toBeLessThan(250)
    } finally {
      leaveForeground()
    }
  })
})
