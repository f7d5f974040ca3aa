import { connectReplay, type ReplayConnection, type ReplayOptions } from "./Replay.ts"
import { type Run, RunImpl, type RunHost, type RunOptions } from "./Run.ts"
import { type FetchLike, TapedeckError, Transport } from "./Transport.ts"

/** The service takes at most this many spans per request. */
export const API_MAX_BATCH_SPANS = 1000

export interface TapedeckOptions {
  /** Where Tapedeck runs, e.g. `http://localhost:8080`. */
  readonly baseUrl: string
  /** An API key (`svc_…`), sent as `x-service-key`. */
  readonly apiKey: string
  /** How often queued spans are sent. Default 200 ms. */
  readonly flushIntervalMs?: number | undefined
  /** Spans per request, at most 1000 (the API's limit). Default 500. */
  readonly maxBatchSpans?: number | undefined
  /** Span updates waiting to be sent, over all runs; further updates are dropped and counted. Default 10 000. */
  readonly maxQueueSpans?: number | undefined
  /** Called with every failure (never thrown). Default: a console warning, the first ten times. */
  readonly onError?: ((error: TapedeckError) => void) | undefined
  readonly fetch?: FetchLike | undefined
  /** Retries of a request after the first attempt (network errors, timeouts, 429, 5xx). Default 4. */
  readonly maxRetries?: number | undefined
  /** First backoff delay, doubled at each retry, with jitter. Default 200 ms. */
  readonly retryBaseDelayMs?: number | undefined
  /** Longest backoff delay (a 429's Retry-After is honoured up to 60 s). Default 5 000 ms. */
  readonly retryMaxDelayMs?: number | undefined
  /** A request without an answer by then is aborted (and retried). Default 10 000 ms. */
  readonly requestTimeoutMs?: number | undefined
  /**
   * After a request got no answer through all its retries, requests fail at once (without trying) for
   * this long, so that flush/finish/close do not each wait out their retries against a dead server. Default 5 000 ms.
   */
  readonly outageCooldownMs?: number | undefined
  /** Requests in flight at once, over all runs. Default 4. */
  readonly maxConcurrentRequests?: number | undefined
  /** About how many characters of JSON a request may carry (a single larger span goes alone). Default 4 000 000. */
  readonly maxBatchBytes?: number | undefined
  /** About how many characters of JSON each input, output or metadata value may take; larger ones are cut short. Default 1 000 000. */
  readonly maxPayloadBytes?: number | undefined
  /** Send what is queued when the process is about to exit (Node and Bun `beforeExit`). Default true. */
  readonly flushOnExit?: boolean | undefined
}

export interface TapedeckStats {
  /** Span updates the server accepted. */
  readonly sent: number
  /** Span updates never queued: the queue was full, or the run finished / the client closed. */
  readonly dropped: number
  /** Span updates given up: refused by the server (4xx), or undelivered after the retries. */
  readonly failed: number
  /** Span updates waiting or in flight. */
  readonly queued: number
}

const positive = (value: number | undefined, fallback: number, min = 1) =>
  typeof value === "number" && Number.isFinite(value) && value >= min ? value : fallback

const MAX_DEFAULT_WARNINGS = 10

type ProcessLike = {
  on?: (event: string, listener: () => void) => unknown
  off?: (event: string, listener: () => void) => unknown
}

/** Clients still open, flushed by one shared `beforeExit` listener. */
const openClients = new Set<Tapedeck>()
let exitListener: (() => void) | undefined

const processLike = (): ProcessLike | undefined => (globalThis as { process?: ProcessLike }).process

const watchExit = (client: Tapedeck) => {
  openClients.add(client)
  const proc = processLike()
  if (exitListener !== undefined || typeof proc?.on !== "function") return
  exitListener = () => {
    for (const c of openClients) if (c.stats().queued > 0 || c.hasWork()) void c.flush()
  }
  proc.on("beforeExit", exitListener)
}

const unwatchExit = (client: Tapedeck) => {
  openClients.delete(client)
  const proc = processLike()
  if (openClients.size > 0 || exitListener === undefined || typeof proc?.off !== "function") return
  proc.off("beforeExit", exitListener)
  exitListener = undefined
}

/**
 * The recording client. Nothing it does throws into the caller, and no promise it returns rejects:
 * failures go to `onError` and are counted in `stats()`.
 */
export class Tapedeck {
  private readonly host: RunHost & { closed: boolean }
  private readonly runs = new Set<RunImpl>()
  private readonly flushIntervalMs: number
  private readonly flushOnExit: boolean
  private timer: ReturnType<typeof setInterval> | undefined
  private closing: Promise<void> | undefined
  private counts = { sent: 0, dropped: 0, failed: 0, pending: 0, inFlight: 0 }
  private warnings = 0

  private readonly credentials: { readonly baseUrl: string; readonly apiKey: string }

  constructor(options: TapedeckOptions) {
    const opts = (options ?? {}) as TapedeckOptions
    this.credentials = { baseUrl: String(opts.baseUrl ?? ""), apiKey: String(opts.apiKey ?? "") }
    this.flushIntervalMs = positive(opts.flushIntervalMs, 200)
    this.flushOnExit = opts.flushOnExit !== false
    const onError = typeof opts.onError === "function" ? opts.onError : undefined
    const maxQueue = Math.floor(positive(opts.maxQueueSpans, 10_000, 0))
    const transport = new Transport({
      baseUrl: String(opts.baseUrl ?? ""),
      apiKey: String(opts.apiKey ?? ""),
      fetch: typeof opts.fetch === "function" ? opts.fetch : undefined,
      maxRetries: Math.floor(positive(opts.maxRetries, 4, 0)),
      retryBaseDelayMs: positive(opts.retryBaseDelayMs, 200, 0),
      retryMaxDelayMs: positive(opts.retryMaxDelayMs, 5_000, 0),
      requestTimeoutMs: positive(opts.requestTimeoutMs, 10_000),
      maxConcurrentRequests: Math.floor(positive(opts.maxConcurrentRequests, 4)),
      outageCooldownMs: positive(opts.outageCooldownMs, 5_000, 0)
    })
    const counts = this.counts
    const self = this
    this.host = {
      transport,
      maxBatchSpans: Math.min(API_MAX_BATCH_SPANS, Math.floor(positive(opts.maxBatchSpans, 500))),
      maxBatchChars: positive(opts.maxBatchBytes, 4_000_000),
      maxPayloadChars: positive(opts.maxPayloadBytes, 1_000_000),
      closed: false,
      report: (error) => {
        try {
          if (onError) onError(error)
          else if (self.warnings++ < MAX_DEFAULT_WARNINGS) {
            const more = self.warnings === MAX_DEFAULT_WARNINGS ? " (further errors are not shown: pass onError)" : ""
            console.warn(`[tapedeck] ${error.message}${more}`)
          }
        } catch {
          // The callback's own failure must not reach the agent either.
        }
      },
      claimSlot: () => {
        if (counts.pending >= maxQueue) return false
        counts.pending++
        return true
      },
      releaseSlots: (n) => {
        counts.pending -= n
      },
      countDropped: (n) => {
        counts.dropped += n
      },
      countSent: (n) => {
        counts.sent += n
      },
      countFailed: (n) => {
        counts.failed += n
      },
      inFlight: (n) => {
        counts.inFlight += n
      },
      runActive: (run) => {
        if (!self.host.closed) self.runs.add(run)
      },
      runSettled: (run) => {
        self.runs.delete(run)
      }
    }
  }

  /** Starts recording a run (a trace). Returns at once; the trace is created in the background. */
  /**
   * Serves SDK-mode replays of `agents` over GET /ws/v1/replay with this client's URL and key (see
   * `connectReplay` in Replay.ts).
   */
  connectReplay(options: ReplayOptions): ReplayConnection {
    return connectReplay(this, {
      ...options,
      baseUrl: options.baseUrl ?? this.credentials.baseUrl,
      apiKey: options.apiKey ?? this.credentials.apiKey
    })
  }

  startRun(options: RunOptions = {}): Run {
    try {
      const run = new RunImpl(this.host, options ?? {})
      if (this.host.closed) {
        this.host.report(
          new TapedeckError("run not recorded: the client is closed", { operation: "record", traceId: run.id })
        )
        return run
      }
      this.runs.add(run)
      this.startTimer()
      return run
    } catch (cause) {
      this.host.report(new TapedeckError("could not start a run", { operation: "record", cause }))
      return new RunImpl({ ...this.host, closed: true }, {})
    }
  }

  /** Sends everything queued so far (creating traces and finishing runs as needed). Never rejects. */
  async flush(): Promise<void> {
    try {
      await Promise.all(Array.from(this.runs, (run) => run.flush()))
    } catch {
      // Runs never reject; this is only a guard.
    }
  }

  /** Flushes, then stops: later runs and span updates are dropped. Runs not finished stay running on the server. */
  close(): Promise<void> {
    if (this.closing) return this.closing
    // Closed first: updates made while the last flush runs are dropped rather than left behind.
    this.host.closed = true
    this.stopTimer()
    this.closing = (async () => {
      try {
        await this.flush()
      } catch {
        // never rejects
      } finally {
        unwatchExit(this)
      }
    })()
    return this.closing
  }

  stats(): TapedeckStats {
    const { sent, dropped, failed, pending, inFlight } = this.counts
    return { sent, dropped, failed, queued: pending + inFlight }
  }

  /** @internal Whether some run still has something to send. */
  hasWork(): boolean {
    for (const run of this.runs) if (run.wantsPass) return true
    return false
  }

  private startTimer() {
    if (this.timer !== undefined || this.host.closed || this.closing) return
    if (this.flushOnExit) watchExit(this)
    this.timer = setInterval(() => this.tick(), this.flushIntervalMs)
    // The timer alone must not keep the process alive.
    ;(this.timer as { unref?: () => void }).unref?.()
  }

  private stopTimer() {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
  }

  private tick() {
    try {
      for (const run of this.runs) if (run.wantsPass) void run.schedule()
    } catch {
      // never throws from a timer either
    }
  }
}
