/** Something waiting to be decided, tagged with the run and the account it belongs to. */
export interface RunItem {
  readonly runKey: string
  readonly accountKey: string
}

export interface CheckBatcherOptions<T extends RunItem> {
  /** Batches in flight at once (each holds one database connection while its statement runs). */
  readonly lanes: number
  /** Items per batch at most. */
  readonly maxBatch: number
  /** Items waiting at most; past it `submit` refuses (the caller fails closed at once instead of queueing). */
  readonly maxQueued: number
  /** Items of one account waiting at most: past it that account's items are refused, nobody else's. */
  readonly maxQueuedPerAccount: number
  /** Called for an item about to be batched: true drops it (the item is settled by the callee, e.g. abandoned). */
  readonly drop: (item: T) => boolean
  /**
   * Handles a batch and calls `done` once, with the items to queue again (a run that moved on meanwhile), which go
   * back to the front of their account's queue, ahead of their runs' later items. `done` frees the batch's lane and
   * runs at once: call it before answering the batch's callers, so that a caller's next check never finds its own
   * lane still taken.
   */
  readonly process: (batch: ReadonlyArray<T>, done: (again: ReadonlyArray<T>) => void) => void
  /**
   * Told, for each item batched or dropped, how long it waited for a lane: since it was queued, or since its run's
   * previous batch finished if that was later. Waiting behind checks of one's own run is the run's own pace (an
   * agent's parallel calls), not a sign that the instance is short of lanes.
   */
  readonly waited?: (ms: number) => void
  readonly now?: () => number
}

/** Why `submit` did not queue an item. */
export type Refusal = "full" | "account-full"

interface Entry<T> {
  readonly item: T
  readonly since: number
}

/**
 * Checks queued per instance and handed to the database in batches. A batch takes waiting items round-robin by
 * account (one item of each account in turn, the account served first rotating from batch to batch), and of each
 * account, in arrival order, the items whose run has no batch in flight. So one account flooding the queue delays
 * another's checks by a batch or so, not by its whole backlog; the checks of one run are applied one batch after
 * another and never race one another for the run's row (no conflicts, no retries between checks of this instance);
 * and however many checks arrive at once, the database sees at most `lanes` statements of them.
 */
export const makeCheckBatcher = <T extends RunItem>(options: CheckBatcherOptions<T>) => {
  const now = options.now ?? (() => performance.now())
  /** Per account, its items in arrival order; the map's order is the order accounts are served in. */
  const queues = new Map<string, Array<Entry<T>>>()
  /** Items queued per run, and when the run's last batch finished (kept only while it has items queued). */
  const queuedPerRun = new Map<string, number>()
  const runFreedAt = new Map<string, number>()
  const busyRuns = new Set<string>()
  let waiting = 0
  let lanesBusy = 0

  const counted = (runKey: string, delta: number) => {
    const n = (queuedPerRun.get(runKey) ?? 0) + delta
    if (n > 0) return void queuedPerRun.set(runKey, n)
    queuedPerRun.delete(runKey)
    runFreedAt.delete(runKey)
  }

  const waitedBy = (entry: Entry<T>, at: number) =>
    options.waited?.(at - Math.max(entry.since, runFreedAt.get(entry.item.runKey) ?? -Infinity))

  /** Takes the next batch out of the queues: items round-robin by account, each account's runs in order. */
  const takeBatch = (): Array<T> => {
    const at = now()
    const batch: Array<T> = []
    const cursors = new Map<string, number>()
    const takenOf = new Map<string, Set<number>>()
    let progress = true
    while (batch.length < options.maxBatch && progress) {
      progress = false
      for (const [account, queue] of queues) {
        if (batch.length >= options.maxBatch) break
        let i = cursors.get(account) ?? 0
        // A run with a batch in flight keeps all its items waiting, so its order holds whoever is served.
        while (i < queue.length && busyRuns.has(queue[i]!.item.runKey)) i++
        if (i >= queue.length) {
          cursors.set(account, i)
          continue
        }
        const entry = queue[i]!
        cursors.set(account, i + 1)
        const taken = takenOf.get(account) ?? new Set()
        takenOf.set(account, taken.add(i))
        progress = true
        waitedBy(entry, at)
        if (options.drop(entry.item)) continue
        batch.push(entry.item)
      }
    }
    for (const [account, taken] of takenOf) {
      const queue = queues.get(account)!
      const rest = queue.filter((_, i) => !taken.has(i))
      for (const i of taken) counted(queue[i]!.item.runKey, -1)
      waiting -= taken.size
      queues.delete(account)
      // Served this time: to the back of the rotation, so the next batch starts with another account.
      if (rest.length > 0) queues.set(account, rest)
    }
    return batch
  }

  const pump = () => {
    while (lanesBusy < options.lanes && waiting > 0) {
      const batch = takeBatch()
      if (batch.length === 0) {
        if (waiting > 0 && [...queues.values()].some((q) => q.some((e) => !busyRuns.has(e.item.runKey)))) continue
        return
      }
      const taken = new Set(batch.map((item) => item.runKey))
      for (const key of taken) busyRuns.add(key)
      lanesBusy++
      let settled = false
      options.process(batch, (again) => {
        if (settled) return
        settled = true
        settle(taken, again)
      })
    }
  }

  const settle = (taken: ReadonlySet<string>, again: ReadonlyArray<T>) => {
    lanesBusy--
    const at = now()
    for (const key of taken) {
      busyRuns.delete(key)
      if (queuedPerRun.has(key)) runFreedAt.set(key, at)
    }
    // Back to the front of their account's queue, in their order, ahead of their runs' later items.
    for (let i = again.length - 1; i >= 0; i--) {
      const item = again[i]!
      const queue = queues.get(item.accountKey)
      const entry = { item, since: at }
      if (queue === undefined) queues.set(item.accountKey, [entry])
      else queue.unshift(entry)
      counted(item.runKey, 1)
      waiting++
    }
    pump()
  }

  return {
    /** Queues an item, or says why not (nothing queued). */
    submit: (item: T): Refusal | undefined => {
      if (waiting >= options.maxQueued) return "full"
      const queue = queues.get(item.accountKey)
      if ((queue?.length ?? 0) >= options.maxQueuedPerAccount) return "account-full"
      const entry = { item, since: now() }
      if (queue === undefined) queues.set(item.accountKey, [entry])
      else queue.push(entry)
      counted(item.runKey, 1)
      waiting++
      pump()
      return undefined
    },
    /** Items waiting for a batch. */
    waiting: () => waiting
  } as const
}
