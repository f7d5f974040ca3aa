/** Something waiting to be decided, tagged with the run it belongs to. */
export interface RunItem {
  readonly runKey: string
}

export interface CheckBatcherOptions<T extends RunItem> {
  /** Batches in flight at once (each holds one database connection while its statement runs). */
  readonly lanes: number
  /** Items per batch at most. */
  readonly maxBatch: number
  /** Items waiting at most; past it `submit` refuses (the caller fails closed at once instead of queueing). */
  readonly maxQueued: number
  /** Called for an item about to be batched: true drops it (the item is settled by the callee, e.g. abandoned). */
  readonly drop: (item: T) => boolean
  /**
   * Handles a batch and calls `done` once, with the items to queue again (a run that moved on meanwhile), which go
   * back to the front of the queue, ahead of their runs' later items. `done` frees the batch's lane and runs at once:
   * call it before answering the batch's callers, so that a caller's next check never finds its own lane still taken.
   */
  readonly process: (batch: ReadonlyArray<T>, done: (again: ReadonlyArray<T>) => void) => void
}

/**
 * Checks queued per instance and handed to the database in batches: a batch takes, in arrival order, every waiting
 * item whose run has no batch in flight. So the checks of one run are applied one batch after another and never
 * race one another for the run's row (no conflicts, no retries between checks of this instance), and however many
 * checks arrive at once, the database sees at most `lanes` statements of them.
 */
export const makeCheckBatcher = <T extends RunItem>(options: CheckBatcherOptions<T>) => {
  let queue: Array<T> = []
  const busyRuns = new Set<string>()
  let lanesBusy = 0

  const pump = () => {
    while (lanesBusy < options.lanes && queue.length > 0) {
      const batch: Array<T> = []
      const rest: Array<T> = []
      const taken = new Set<string>()
      for (const item of queue) {
        // A full batch leaves everything after it waiting: a run cut in two keeps its order (it is busy now).
        if (batch.length >= options.maxBatch || busyRuns.has(item.runKey)) {
          rest.push(item)
          continue
        }
        if (options.drop(item)) continue
        batch.push(item)
        taken.add(item.runKey)
      }
      queue = rest
      if (batch.length === 0) return
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
    for (const key of taken) busyRuns.delete(key)
    if (again.length > 0) queue = [...again, ...queue]
    pump()
  }

  return {
    /** Queues an item; false when the queue is full (nothing queued). */
    submit: (item: T): boolean => {
      if (queue.length >= options.maxQueued) return false
      queue.push(item)
      pump()
      return true
    },
    /** Items waiting for a batch. */
    waiting: () => queue.length
  } as const
}
