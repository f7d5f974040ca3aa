/**
 * The bookkeeping of the ingestion permits (IngestGate): who holds how many, and which upload to take back when
 * an account under its fair share asks while all are taken. Synchronous and free of effects, so that the HTTP
 * layer can ask it before any other work and a property test can drive it through any interleaving.
 *
 * The rule:
 * - a free permit goes to whoever asks (one account alone may use them all);
 * - when all are taken, the asker's fair share is the bound divided by the number of accounts holding permits,
 *   the asker included (at least one). An asker under its share takes the permit of the longest-running upload
 *   of the account holding the most permits over that share, provided the upload is still receiving its body
 *   (no work has been done for it yet); that upload is told and stops. Otherwise the asker is refused.
 */
export interface Permit {
  readonly accountId: string
  /** Order of admission: the smallest is the longest-running. */
  readonly admitted: number
  /** Still receiving its body: may be taken back. */
  uploading: boolean
  /** Taken back for another account; its holder must stop. */
  preempted: boolean
  released: boolean
}

export class IngestPermits {
  private readonly held = new Map<string, Set<Permit>>()
  private inflight = 0
  private admissions = 0

  constructor(readonly max: number) {}

  /** Permits in use now. */
  get inUse() {
    return this.inflight
  }

  /** Permits held now by one account. */
  heldBy(accountId: string) {
    return this.held.get(accountId)?.size ?? 0
  }

  /** Accounts holding permits now. */
  get holders(): ReadonlyArray<string> {
    return [...this.held.keys()]
  }

  /** The asker's fair share while all permits are taken. */
  fairShare(asker: string) {
    return Math.max(1, Math.floor(this.max / (this.held.size + (this.held.has(asker) ? 0 : 1))))
  }

  /** The upload that would be taken back for `asker`, if the rule allows one. */
  victimFor(asker: string): Permit | undefined {
    const share = this.fairShare(asker)
    if (this.heldBy(asker) >= share) return undefined
    let victim: Set<Permit> | undefined
    for (const [accountId, permits] of this.held) {
      if (accountId === asker || permits.size <= share) continue
      if (victim !== undefined && permits.size <= victim.size) continue
      for (const permit of permits) {
        if (permit.uploading) {
          victim = permits
          break
        }
      }
    }
    if (victim === undefined) return undefined
    let oldest: Permit | undefined
    for (const permit of victim)
      if (permit.uploading && (oldest === undefined || permit.admitted < oldest.admitted)) oldest = permit
    return oldest
  }

  /** Whether `ask(accountId)` would succeed now. */
  admits(accountId: string) {
    return this.inflight < this.max || this.victimFor(accountId) !== undefined
  }

  /** A permit for `accountId`, and the upload taken back for it if any; undefined when refused. */
  ask(accountId: string): { readonly permit: Permit; readonly preempted: Permit | undefined } | undefined {
    let preempted: Permit | undefined
    if (this.inflight >= this.max) {
      preempted = this.victimFor(accountId)
      if (preempted === undefined) return undefined
      this.release(preempted)
      preempted.preempted = true
    }
    const permit: Permit = {
      accountId,
      admitted: this.admissions++,
      uploading: true,
      preempted: false,
      released: false
    }
    this.inflight++
    const permits = this.held.get(accountId)
    if (permits === undefined) this.held.set(accountId, new Set([permit]))
    else permits.add(permit)
    return { permit, preempted }
  }

  /** The permit's body has arrived whole: it can no longer be taken back. */
  uploaded(permit: Permit) {
    permit.uploading = false
  }

  /** Gives the permit back (again is a no-op: a preempted permit was given back when it was taken). */
  release(permit: Permit) {
    if (permit.released) return
    permit.released = true
    this.inflight--
    const permits = this.held.get(permit.accountId)
    permits?.delete(permit)
    if (permits?.size === 0) this.held.delete(permit.accountId)
  }
}
