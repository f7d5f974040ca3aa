import { SqlError } from "@effect/sql"
import { Effect } from "effect"

/**
 * Which shared parts (account, SHA-256) a writer knows to be stored, so that it sends their hash without their text:
 * a conversation's history then costs its bytes once, not at every model call. A part confirmed present at time t
 * (by a write that stored or referenced it: the write unmarks a part marked released) can only be swept once marked
 * again and left marked for the sweep's grace period, so it is certainly stored until t + grace. Entries are trusted
 * for half the grace period, measured from before the confirming write began. In memory, per writer, bounded.
 */
export class KnownParts {
  private readonly confirmed = new Map<string, number>()

  constructor(
    private readonly graceMs: number,
    private readonly capacity = 100_000
  ) {}

  /** Whether the part can be sent by hash only at `now`. */
  readonly has = (accountId: string, hash: string, now: number): boolean => {
    const at = this.confirmed.get(`${accountId}:${hash}`)
    return at !== undefined && now - at < this.graceMs / 2
  }

  /** Records parts a write that began at `startedAt` stored or referenced. */
  readonly confirm = (accountId: string, hashes: Iterable<string>, startedAt: number) => {
    if (this.graceMs <= 0) return
    for (const hash of hashes) {
      const key = `${accountId}:${hash}`
      this.confirmed.delete(key)
      this.confirmed.set(key, startedAt)
    }
    for (const key of this.confirmed.keys()) {
      if (this.confirmed.size <= this.capacity) break
      this.confirmed.delete(key)
    }
  }

  /** Forgets the account's parts (after a write was refused for a part it thought stored). */
  readonly forget = (accountId: string) => {
    for (const key of this.confirmed.keys()) if (key.startsWith(`${accountId}:`)) this.confirmed.delete(key)
  }
}

/** The database refused a part sent by hash only: it is not stored (0030_shared_span_content, TD001). */
export const isPartLost = (e: unknown) =>
  e instanceof SqlError.SqlError && (e.cause as { readonly code?: unknown } | undefined)?.code === "TD001"

/**
 * Runs a write of spans with the parts `known` holds sent by hash only, then records every part it sent as stored.
 * Refused for a part sent by hash only (which the grace period rules out unless the sweep's setting changed), it
 * forgets the account's parts and writes again with every text.
 */
export const writeWithKnownParts = <A, E, R>(
  known: KnownParts,
  accountId: string,
  write: (stored: ((hash: string) => boolean) | undefined, sent: Set<string>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const startedAt = Date.now()
    const attempt = (stored: ((hash: string) => boolean) | undefined) => {
      const sent = new Set<string>()
      return write(stored, sent).pipe(Effect.tap(() => known.confirm(accountId, sent, startedAt)))
    }
    return attempt((hash) => known.has(accountId, hash, startedAt)).pipe(
      Effect.catchIf(isPartLost, () =>
        Effect.suspend(() => {
          known.forget(accountId)
          return attempt(undefined)
        })
      )
    )
  })
