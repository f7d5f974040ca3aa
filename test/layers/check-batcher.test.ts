import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { makeCheckBatcher } from "#layers/enforcement/CheckBatcher"

interface Item {
  readonly runKey: string
  readonly seq: number
  readonly abandoned: boolean
  /** Batches that must send it round again before it is done (a run another instance wrote meanwhile). */
  retries: number
}

const scenario = fc.record({
  lanes: fc.integer({ min: 1, max: 4 }),
  maxBatch: fc.integer({ min: 1, max: 6 }),
  items: fc.array(
    fc.record({
      run: fc.integer({ min: 0, max: 4 }),
      abandoned: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
      retries: fc.integer({ min: 0, max: 2 }),
      /** Milliseconds before it is submitted, and that its batch takes. */
      at: fc.integer({ min: 0, max: 6 }),
      takes: fc.integer({ min: 0, max: 4 })
    }),
    { minLength: 1, maxLength: 40 }
  )
})

describe("CheckBatcher", () => {
  test("any interleaving: a run is in one batch at a time, its items in order, each item done once, lanes respected", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ lanes, maxBatch, items }) => {
        const busy = new Set<string>()
        let inFlight = 0
        let maxInFlight = 0
        const finished: Array<Item> = []
        const dropped: Array<Item> = []
        const violations: Array<string> = []
        const takes = new Map<number, number>()
        const batcher = makeCheckBatcher<Item>({
          lanes,
          maxBatch,
          maxQueued: 1000,
          drop: (item) => {
            if (item.abandoned) dropped.push(item)
            return item.abandoned
          },
          process: (batch, done) => void (async () => {
            inFlight++
            maxInFlight = Math.max(maxInFlight, inFlight)
            if (batch.length > maxBatch) violations.push(`batch of ${batch.length} > ${maxBatch}`)
            const runs = new Set(batch.map((i) => i.runKey))
            for (const run of runs) {
              if (busy.has(run)) violations.push(`run ${run} in two batches at once`)
              busy.add(run)
            }
            await Bun.sleep(Math.max(...batch.map((i) => takes.get(i.seq) ?? 0)))
            for (const run of runs) busy.delete(run)
            inFlight--
            // A run whose first item must go round again sends all its items of this batch round again.
            const again = new Set([...runs].filter((run) => batch.find((i) => i.runKey === run)!.retries > 0))
            const retry = batch.filter((i) => again.has(i.runKey))
            for (const i of batch) {
              if (again.has(i.runKey)) {
                if (i === batch.find((b) => b.runKey === i.runKey)) i.retries--
              } else finished.push(i)
            }
            done(retry)
          })()
        })
        const submitted: Array<Item> = []
        await Promise.all(items.map(async (spec, seq) => {
          await Bun.sleep(spec.at)
          const item: Item = { runKey: `run-${spec.run}`, seq, abandoned: spec.abandoned, retries: spec.retries }
          takes.set(seq, spec.takes)
          submitted.push(item)
          expect(batcher.submit(item)).toBe(true)
        }))
        for (let i = 0; i < 500 && finished.length + dropped.length < submitted.length; i++) await Bun.sleep(5)

        expect(violations).toEqual([])
        expect(maxInFlight).toBeLessThanOrEqual(lanes)
        expect(batcher.waiting()).toBe(0)
        // Every item settled exactly once: done or dropped.
        expect([...finished, ...dropped].map((i) => i.seq).sort((a, b) => a - b)).toEqual(submitted.map((i) => i.seq).sort((a, b) => a - b))
        // Per run, in the order submitted.
        for (const run of new Set(submitted.map((i) => i.runKey))) {
          const order = submitted.filter((i) => i.runKey === run && !i.abandoned).map((i) => i.seq)
          expect(finished.filter((i) => i.runKey === run).map((i) => i.seq)).toEqual(order)
        }
      }),
      { numRuns: 60 }
    )
  }, 60_000)

  test("a full queue refuses at once", () => {
    const batcher = makeCheckBatcher<Item>({
      lanes: 1,
      maxBatch: 10,
      maxQueued: 2,
      drop: () => false,
      process: () => {}
    })
    const item = (seq: number): Item => ({ runKey: "r", seq, abandoned: false, retries: 0 })
    expect(batcher.submit(item(0))).toBe(true) // taken by the one lane at once
    expect(batcher.submit(item(1))).toBe(true)
    expect(batcher.submit(item(2))).toBe(true)
    expect(batcher.submit(item(3))).toBe(false)
    expect(batcher.waiting()).toBe(2)
  })
})
