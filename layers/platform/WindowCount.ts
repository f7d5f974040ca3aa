/**
 * A count of events over a sliding window (a second by default), kept in buckets of a tenth of it: an event leaves
 * the count when its bucket is more than the window behind the newest. Synchronous and free of effects, so that the
 * HTTP layer can ask it before reading a body. The caller gives the time (ms) of each event and question.
 */
export class WindowCount {
  private readonly counts: Array<number>
  /** The bucket (as a count of bucket lengths since the epoch) that index `current % buckets` holds. */
  private current = Number.NEGATIVE_INFINITY

  constructor(
    private readonly windowMs = 1000,
    private readonly buckets = 10
  ) {
    this.counts = new Array<number>(buckets).fill(0)
  }

  /** Moves the window to `now`, emptying the buckets it leaves behind. */
  private advance(now: number) {
    const bucket = Math.floor(now / (this.windowMs / this.buckets))
    if (bucket <= this.current) return
    for (let b = Math.max(this.current + 1, bucket - this.buckets + 1); b <= bucket; b++)
      this.counts[b % this.buckets] = 0
    this.current = bucket
  }

  /** An event at `now`. */
  add(now: number) {
    this.advance(now)
    this.counts[this.current % this.buckets]!++
  }

  /** The events within the window up to `now`. */
  total(now: number): number {
    this.advance(now)
    let n = 0
    for (const c of this.counts) n += c
    return n
  }
}
