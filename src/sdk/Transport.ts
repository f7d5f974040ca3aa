/**
 * HTTP to the Tapedeck API with retries: network errors, timeouts, 429 (after its Retry-After, which also
 * pauses every other request of the client) and 5xx are retried with exponential backoff and jitter;
 * other statuses are final. When a request gets no answer at all through its retries, the server is taken
 * for unreachable for `outageCooldownMs`: requests in that time fail at once instead of each waiting out
 * its own retries (a blackholed server would otherwise hold every flush for a minute). Never throws:
 * every outcome is a value.
 */

export type Operation = "create_trace" | "send_spans" | "finish_trace" | "record"

/** What the SDK reports through `onError`. Never thrown into the agent. */
export class TapedeckError extends Error {
  override readonly name = "TapedeckError"
  /** HTTP status, when the server answered. */
  readonly status: number | undefined
  /** The service's error code (`unauthorized`, `validation_failed`, `conflict`, …), when it sent one. */
  readonly code: string | undefined
  readonly operation: Operation
  readonly traceId: string | undefined
  /** How many span updates this failure lost. */
  readonly spanCount: number

  constructor(
    message: string,
    details: {
      operation: Operation
      status?: number | undefined
      code?: string | undefined
      traceId?: string | undefined
      spanCount?: number | undefined
      cause?: unknown
    }
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause })
    this.operation = details.operation
    this.status = details.status
    this.code = details.code
    this.traceId = details.traceId
    this.spanCount = details.spanCount ?? 0
  }
}

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>

export interface TransportOptions {
  readonly baseUrl: string
  readonly apiKey: string
  readonly fetch: FetchLike | undefined
  readonly maxRetries: number
  readonly retryBaseDelayMs: number
  readonly retryMaxDelayMs: number
  readonly requestTimeoutMs: number
  readonly maxConcurrentRequests: number
  readonly outageCooldownMs: number
}

export type SendResult =
  | { readonly ok: true; readonly status: number; readonly body: unknown }
  | {
      readonly ok: false
      /** Undefined when the server never answered (network error, timeout). */
      readonly status: number | undefined
      readonly code: string | undefined
      readonly message: string
      readonly retryable: boolean
      /** Not attempted: the server was found unreachable moments ago. */
      readonly skipped?: boolean
      readonly cause?: unknown
    }

/** Longest wait honoured for a Retry-After. */
const MAX_RETRY_AFTER_MS = 60_000

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))

/** Retry-After in milliseconds: delta-seconds or an HTTP date. */
export const retryAfterMs = (header: string | null): number | undefined => {
  if (header === null) return undefined
  const seconds = Number(header.trim())
  if (header.trim() !== "" && Number.isFinite(seconds)) return Math.max(0, seconds * 1000)
  const date = Date.parse(header)
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now())
}

export class Transport {
  private readonly baseUrl: string
  private active = 0
  private readonly waiting: Array<() => void> = []
  private pausedUntil = 0
  private unreachableUntil = 0
  private lastOutage = ""

  constructor(private readonly options: TransportOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "")
  }

  async send(method: "POST" | "PATCH", path: string, body: string): Promise<SendResult> {
    if (Date.now() < this.unreachableUntil) {
      const message = `not tried: the server was unreachable moments ago (${this.lastOutage})`
      return { ok: false, status: undefined, code: undefined, message, retryable: true, skipped: true }
    }
    let last: SendResult | undefined
    for (let attempt = 0; attempt <= this.options.maxRetries; attempt++) {
      if (attempt > 0) await sleep(this.backoff(attempt - 1, last))
      const pause = this.pausedUntil - Date.now()
      if (pause > 0) await sleep(pause)
      last = await this.attempt(method, path, body)
      if (last.status !== undefined) this.unreachableUntil = 0
      if (last.ok || !last.retryable) return last
    }
    if (!last!.ok && last!.status === undefined) {
      this.unreachableUntil = Date.now() + this.options.outageCooldownMs
      this.lastOutage = last!.message
    }
    return last!
  }

  private backoff(retry: number, last: SendResult | undefined): number {
    const exponential = Math.min(this.options.retryMaxDelayMs, this.options.retryBaseDelayMs * 2 ** retry)
    const jittered = exponential / 2 + (Math.random() * exponential) / 2
    const after = last && !last.ok && last.status === 429 ? this.pausedUntil - Date.now() : 0
    return Math.max(jittered, after)
  }

  private async attempt(method: string, path: string, body: string): Promise<SendResult> {
    await this.acquire()
    const controller = typeof AbortController === "function" ? new AbortController() : undefined
    const timer = setTimeout(() => controller?.abort(), this.options.requestTimeoutMs)
    try {
      const init: RequestInit = {
        method,
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          "x-service-key": this.options.apiKey
        },
        body
      }
      if (controller) init.signal = controller.signal
      const fetchImpl = this.options.fetch ?? ((input: string, init: RequestInit) => globalThis.fetch(input, init))
      const response = await fetchImpl(this.baseUrl + path, init)
      const text = await response.text().catch(() => "")
      let parsed: unknown
      try {
        parsed = text === "" ? undefined : JSON.parse(text)
      } catch {
        parsed = text
      }
      if (response.ok) return { ok: true, status: response.status, body: parsed }
      const errorBody = (typeof parsed === "object" && parsed !== null ? parsed : {}) as Record<string, unknown>
      const message = typeof errorBody.error === "string" ? errorBody.error : `HTTP ${response.status}`
      const code = typeof errorBody.code === "string" ? errorBody.code : undefined
      if (response.status === 429) {
        const wait = Math.min(MAX_RETRY_AFTER_MS, retryAfterMs(response.headers.get("retry-after")) ?? 1000)
        this.pausedUntil = Math.max(this.pausedUntil, Date.now() + wait)
      }
      const retryable = response.status === 429 || response.status >= 500
      return { ok: false, status: response.status, code, message, retryable }
    } catch (cause) {
      const timedOut = controller?.signal.aborted === true
      const message = timedOut
        ? `no answer within ${this.options.requestTimeoutMs} ms`
        : `network error: ${cause instanceof Error ? cause.message : String(cause)}`
      return { ok: false, status: undefined, code: undefined, message, retryable: true, cause }
    } finally {
      clearTimeout(timer)
      this.release()
    }
  }

  private acquire(): Promise<void> {
    if (this.active < this.options.maxConcurrentRequests) {
      this.active++
      return Promise.resolve()
    }
    return new Promise((resolve) => this.waiting.push(resolve))
  }

  private release() {
    const next = this.waiting.shift()
    if (next) next()
    else this.active--
  }
}
