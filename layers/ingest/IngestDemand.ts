import { WindowCount } from "../platform/WindowCount.ts"

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
  private readonly admittedIn = new WindowCount()
  private readonly refusedIn = new WindowCount()

  /** An export was admitted at `now` (ms). */
  admitted(now: number) {
    this.admittedIn.add(now)
  }

  /** An export was refused at `now` (ms). */
  refused(now: number) {
    this.refusedIn.add(now)
  }

  /** Whether, in the second up to `now`, more exports were refused than admitted (and at least MIN_REFUSED). */
  exceeded(now: number): boolean {
    const refused = this.refusedIn.total(now)
    return refused >= MIN_REFUSED && refused > this.admittedIn.total(now)
  }
}
