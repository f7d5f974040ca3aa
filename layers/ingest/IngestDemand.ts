/** The sliding window over which exports are counted, in buckets of a tenth of it. */
const WINDOW_MS = 1000
const BUCKETS = 10
/** Refusals within the window below which exports never count as over capacity: a burst, not the instance's state. */
const MIN_REFUSED = 10

/**
 * Whether OTLP exports come faster than an instance takes them: within the last second, more were refused (for want
 * of a permit, or to let enforcement checks through) than admitted, and at least MIN_REFUSED. An exporter whose export
 * is refused then waits for its retry whatever the instance does, so refusing one more costs it little; refusing
 * exports an instance would have taken in time costs every exporter a retry. Synchronous and free of effects, like
 * LagLimit, so that the HTTP layer can ask it before reading a body.
 */
export class IngestDemand {
  private readonly admittedIn = new Array<number>(BUCKETS).fill(0)
  private readonly refusedIn = new Array<number>(BUCKETS).fill(0)
  /** The bucket (as a count of bucket lengths since the epoch) that index `current % BUCKETS` holds. */
  private current = Number.NEGATIVE_INFINITY

  /** Moves the window to `now` (ms), emptying the buckets it leaves behind. */
  private advance(now: number) {
    const bucket = Math.floor(now / (WINDOW_MS / BUCKETS))
    if (bucket <= this.current) return
    for (let b = Math.max(this.current + 1, bucket - BUCKETS + 1); b <= bucket; b++) {
      this.admittedIn[b % BUCKETS] = 0
      this.refusedIn[b % BUCKETS] = 0
    }
    this.current = bucket
  }

  /** An export was admitted at `now`. */
  admitted(now: number) {
    this.advance(now)
    this.admittedIn[this.current % BUCKETS]!++
  }

  /** An export was refused at `now`. */
  refused(now: number) {
    this.advance(now)
    this.refusedIn[this.current % BUCKETS]!++
  }

  /** Whether, in the second up to `now`, more exports were refused than admitted (and at least MIN_REFUSED). */
  exceeded(now: number): boolean {
    this.advance(now)
    let admitted = 0
    let refused = 0
    for (let i = 0; i < BUCKETS; i++) {
      admitted += this.admittedIn[i]!
      refused += this.refusedIn[i]!
    }
    return refused >= MIN_REFUSED && refused > admitted
  }
}
