/**
 * How many exports an instance runs at once while enforcement checks wait behind its event loop: halved (down to
 * one) at each step the loop is late, and one more for each step it is not, up to the permits' bound. Ingestion
 * slows down as far as the checks need and never stops: a loop kept late by something else than the exports (a
 * storm of refused requests, say) still lets one export through at a time. Synchronous and free of effects, so that
 * the HTTP layer can ask it before reading a body.
 */
export class LagLimit {
  private limit: number
  private steppedAt = Number.NEGATIVE_INFINITY

  constructor(
    readonly max: number,
    /** How often the limit moves. */
    readonly stepMs: number
  ) {
    this.limit = max
  }

  /** The limit at `now` (ms), moved by the steps since it last moved, `late` asked once when a step is due. */
  at(now: number, late: () => boolean): number {
    const steps = Math.floor((now - this.steppedAt) / this.stepMs)
    if (steps < 1) return this.limit
    this.steppedAt = now
    this.limit = late() ? Math.max(1, this.limit >> 1) : Math.min(this.max, this.limit + Math.min(steps, this.max))
    return this.limit
  }
}
