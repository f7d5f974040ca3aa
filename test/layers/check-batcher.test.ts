import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { makeCheckBatcher } from "#layers/enforcement/CheckBatcher"

interface Item {
  readonly runKey: string
  readonly accountKey: string
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
          maxQueuedPerAccount: 1000,
          drop: (item) => {
            if (item.abandoned) dropped.push(item)
            return item.abandoned
          },
          process: (batch, done) =>
            void (async () => {
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
        await Promise.all(
          items.map(async (spec, seq) => {
            await Bun.sleep(spec.at)
            const account = `acct-${spec.run % 2}`
            const item: Item = {
              runKey: `${account}/run-${spec.run}`,
              accountKey: account,
              seq,
              abandoned: spec.abandoned,
              retries: spec.retries
            }
            takes.set(seq, spec.takes)
            submitted.push(item)
            expect(batcher.submit(item)).toBeUndefined()
          })
        )
        for (let i = 0; i < 500 && finished.length + dropped.length < submitted.length; i++) await Bun.sleep(5)

        expect(violations).toEqual([])
        expect(maxInFlight).toBeLessThanOrEqual(lanes)
        expect(batcher.waiting()).toBe(0)
        // Every item settled exactly once: done or dropped.
        expect([...finished, ...dropped].map((i) => i.seq).sort((a, b) => a - b)).toEqual(
          submitted.map((i) => i.seq).sort((a, b) => a - b)
        )
        // Per run, in the order submitted.
        for (const run of new Set(submitted.map((i) => i.runKey))) {
          const order = submitted.filter((i) => i.runKey === run && !i.abandoned).map((i) => i.seq)
          expect(finished.filter((i) => i.runKey === run).map((i) => i.seq)).toEqual(order)
        }
      }),
      { numRuns: 60 }
    )
  }, 60_000)

  test("a full queue refuses at once; an account's full share refuses that account only", () => {
    const batcher = makeCheckBatcher<Item>({
      lanes: 1,
      maxBatch: 10,
      maxQueued: 3,
      maxQueuedPerAccount: 2,
      drop: () => false,
      process: () => {}
    })
    const item = (seq: number, account = "a"): Item => ({
      runKey: `${account}/r`,
      accountKey: account,
      seq,
      abandoned: false,
      retries: 0
    })
    expect(batcher.submit(item(0))).toBeUndefined() // taken by the one lane at once
    expect(batcher.submit(item(1))).toBeUndefined()
    expect(batcher.submit(item(2))).toBeUndefined()
    expect(batcher.submit(item(3))).toBe("account-full")
    expect(batcher.submit(item(4, "b"))).toBeUndefined()
    expect(batcher.submit(item(5, "c"))).toBe("full")
    expect(batcher.waiting()).toBe(3)
  })

  test("one account flooding: another account's item is batched within as many batches as there are lanes; runs in order; each item once", () => {
    fc.assert(
      fc.property(
        fc.record({
          lanes: fc.integer({ min: 1, max: 3 }),
          maxBatch: fc.integer({ min: 1, max: 8 }),
          flood: fc.array(fc.integer({ min: 0, max: 20 }), { minLength: 20, maxLength: 300 }),
          /** After how many finished batches the other account's items arrive, and on which runs. */
          arrivesAfter: fc.integer({ min: 0, max: 10 }),
          victim: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 4 })
        }),
        ({ arrivesAfter, flood, lanes, maxBatch, victim }) => {
          const inFlight: Array<{ batch: ReadonlyArray<Item>; done: (again: ReadonlyArray<Item>) => void }> = []
          const batches: Array<ReadonlyArray<Item>> = []
          const batcher = makeCheckBatcher<Item>({
            lanes,
            maxBatch,
            maxQueued: 100_000,
            maxQueuedPerAccount: 100_000,
            drop: () => false,
            process: (batch, done) => {
              batches.push(batch)
              inFlight.push({ batch, done })
            }
          })
          const submitted: Array<Item> = []
          const submit = (accountKey: string, run: number) => {
            const item: Item = {
              runKey: `${accountKey}/run-${run}`,
              accountKey,
              seq: submitted.length,
              abandoned: false,
              retries: 0
            }
            submitted.push(item)
            expect(batcher.submit(item)).toBeUndefined()
          }
          for (const run of flood) submit("flood", run)
          let finishedBatches = 0
          let victimFrom: number | undefined
          // Batches finish oldest first; the other account's items arrive mid-flood.
          while (inFlight.length > 0 || victimFrom === undefined) {
            if (victimFrom === undefined && (finishedBatches >= arrivesAfter || inFlight.length === 0)) {
              victimFrom = batches.length
              for (const run of victim) submit("victim", run)
              continue
            }
            inFlight.shift()!.done([])
            finishedBatches++
          }
          // Its first item is in one of the next batches formed: the flood's backlog is not ahead of it.
          const firstVictim = batches.findIndex((b) => b.some((i) => i.accountKey === "victim"))
          expect(firstVictim).toBeGreaterThanOrEqual(victimFrom!)
          expect(firstVictim - victimFrom!).toBeLessThanOrEqual(lanes)
          // Each item batched exactly once, each run's items in the order submitted.
          const order = batches.flat()
          expect(order.map((i) => i.seq).sort((a, b) => a - b)).toEqual(submitted.map((i) => i.seq))
          for (const run of new Set(submitted.map((i) => i.runKey))) {
            const ofRun = order.filter((i) => i.runKey === run).map((i) => i.seq)
            expect(ofRun).toEqual([...ofRun].sort((a, b) => a - b))
          }
        }
      ),
      { numRuns: 200 }
    )
  })

  test("the wait reported leaves out time spent behind the item's own run", () => {
    let clock = 0
    const waits: Array<number> = []
    const inFlight: Array<(again: ReadonlyArray<Item>) => void> = []
    const batcher = makeCheckBatcher<Item>({
      lanes: 2,
      maxBatch: 10,
      maxQueued: 100,
      maxQueuedPerAccount: 100,
      drop: () => false,
      process: (_, done) => void inFlight.push(done),
      waited: (ms) => void waits.push(ms),
      now: () => clock
    })
    const item = (seq: number, run: string): Item => ({
      runKey: run,
      accountKey: "a",
      seq,
      abandoned: false,
      retries: 0
    })
    batcher.submit(item(0, "r")) // batched at once
    batcher.submit(item(1, "r")) // waits behind its own run, a lane being free
    clock = 500
    inFlight.shift()!([])
    expect(waits).toEqual([0, 0])
    // Both lanes taken by other runs: now an item waits for a lane, and that wait counts.
    batcher.submit(item(2, "s"))
    batcher.submit(item(3, "t"))
    clock = 800
    inFlight.shift()!([])
    expect(waits).toEqual([0, 0, 0, 300])
  })
})
