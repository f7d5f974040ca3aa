/**
 * A run (one trace) and its spans, with the run's own send queue.
 *
 * Each span update (start, end) leaves a JSON snapshot of the span; the span waits in the run's queue
 * until a pass sends it. A span updated again while it waits is sent once, in its latest form. Passes of a
 * run are sequential: create the trace (once), send the queued spans in batches in queue order, then the
 * PATCH that finishes the trace. A span is only ever sent after its parent has been accepted or in the
 * same batch: a parent the server does not have (its update was dropped or failed) is sent again, in its
 * latest form, just before its child.
 */
import {
  cleanText,
  isoOf,
  isUuid,
  randomUuid,
  textOf,
  toAmount,
  toCount,
  toJsonObject,
  toJsonSafe
} from "./Sanitize.ts"
import { type Operation, type SendResult, TapedeckError, type Transport } from "./Transport.ts"

export const SPAN_TYPES = [
  "llm_call",
  "tool_call",
  "tool_result",
  "reasoning",
  "action",
  "error",
  "fork_point"
] as const
export type SpanType = (typeof SPAN_TYPES)[number]

export type RunStatus = "completed" | "failed"

export interface RunOptions {
  /** The trace id (a UUID); a fresh random one by default. */
  readonly id?: string | undefined
  readonly name?: string | undefined
  readonly input?: unknown
  readonly sessionId?: string | undefined
  /** A project UUID. */
  readonly projectId?: string | undefined
  readonly metadata?: Record<string, unknown> | undefined
}

export interface SpanOptions {
  readonly type: SpanType
  readonly name: string
  readonly model?: string | undefined
  readonly input?: unknown
  /** The parent span: a handle of this run, or the id of a span the trace already has. */
  readonly parent?: SpanHandle | string | null | undefined
  readonly agentId?: string | undefined
  readonly parentAgentId?: string | undefined
  readonly agentRole?: string | undefined
  readonly metadata?: Record<string, unknown> | undefined
}

export interface SpanEndOptions {
  readonly output?: unknown
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
  readonly cost?: number | undefined
  /** An Error (recorded as "Name: message") or any text. */
  readonly error?: unknown
  /** Merged over the metadata given at start. */
  readonly metadata?: Record<string, unknown> | undefined
}

export interface FinishOptions {
  /** Default: "failed" when `error` is given, else "completed". */
  readonly status?: RunStatus | undefined
  readonly output?: unknown
  /** Recorded as a root span of type "error" (the trace itself has no error field). */
  readonly error?: unknown
}

export interface SpanHandle {
  readonly id: string
  readonly traceId: string
  readonly type: SpanType
  readonly name: string
  /** Whether end() was called (or the run finished and ended it). */
  readonly ended: boolean
  /** Ends the span: sets ended_at and duration_ms. Only the first call counts. */
  end(options?: SpanEndOptions): void
  /** Starts a child span of this one. */
  startSpan(options: Omit<SpanOptions, "parent">): SpanHandle
}

export interface Run {
  /** The trace id. */
  readonly id: string
  readonly finished: boolean
  startSpan(options: SpanOptions): SpanHandle
  /** Sends what the run has queued; resolves when it is accepted or given up. */
  flush(): Promise<void>
  /**
   * Ends the spans still open (at this instant), sends everything, then finishes the trace. Resolves,
   * never rejects, once the trace is finished or given up. Later calls return the same promise.
   */
  finish(options?: FinishOptions): Promise<void>
}

/** What a run needs from its client. */
export interface RunHost {
  readonly transport: Transport
  readonly maxBatchSpans: number
  readonly maxBatchChars: number
  readonly maxPayloadChars: number
  readonly closed: boolean
  report(error: TapedeckError): void
  /** Claims a queue slot; false when the queue is full (the update is then dropped and counted). */
  claimSlot(): boolean
  releaseSlots(n: number): void
  countDropped(n: number): void
  countSent(n: number): void
  countFailed(n: number): void
  inFlight(n: number): void
  /** The run has something to send: the client holds it (for its timer, flush and close) until it is settled. */
  runActive(run: RunImpl): void
  runSettled(run: RunImpl): void
}

const TEXT_LIMITS = { name: 500, model: 100, agent: 500, error: 100_000, session: 100 } as const

interface SpanRecord {
  readonly id: string
  readonly parentId: string | null
  readonly parent: SpanRecord | undefined
  /**
   * The latest snapshot, kept while the server may still need it: released once accepted, and for an
   * ended span once it is dropped or failed (the queue bound must bound memory too).
   */
  json: string | undefined
  ended: boolean
  /** The server has some version of it. */
  stored: boolean
  /** The server refused it (400), or its parent: later updates are not sent. */
  rejected: boolean
  pending: boolean
}

interface Entry {
  readonly record: SpanRecord
  readonly json: string
}

const part = (key: string, value: unknown): string | undefined =>
  value === undefined ? undefined : `${JSON.stringify(key)}:${JSON.stringify(value)}`

const fromParts = (parts: ReadonlyArray<string | undefined>) => `{${parts.filter((p) => p !== undefined).join(",")}}`

const optionalText = (value: unknown, max: number): string | undefined =>
  value === undefined || value === null ? undefined : cleanText(typeof value === "string" ? value : textOf(value), max)

class SpanImpl implements SpanHandle {
  ended = false
  readonly type: SpanType
  readonly name: string
  private readonly startedAt = Date.now()
  private startParts: Array<string | undefined> | undefined
  private startMetadata: Record<string, unknown> | undefined

  constructor(
    private readonly run: RunImpl,
    readonly record: SpanRecord,
    options: SpanOptions,
    type: SpanType
  ) {
    this.type = type
    this.name = cleanText(
      typeof options.name === "string" ? options.name : textOf(options.name ?? type),
      TEXT_LIMITS.name
    )
    const limit = run.host.maxPayloadChars
    this.startMetadata = toJsonObject(options.metadata, limit)
    this.startParts = [
      part("id", record.id),
      part("parent_id", record.parentId),
      part("span_type", type),
      part("name", this.name),
      part("model", optionalText(options.model, TEXT_LIMITS.model)),
      part("input", toJsonSafe(options.input, limit)),
      part("agent_id", optionalText(options.agentId, TEXT_LIMITS.agent)),
      part("parent_agent_id", optionalText(options.parentAgentId, TEXT_LIMITS.agent)),
      part("agent_role", optionalText(options.agentRole, TEXT_LIMITS.agent)),
      part("started_at", isoOf(this.startedAt))
    ]
    record.json = fromParts([...this.startParts, part("metadata", this.startMetadata)])
  }

  get id() {
    return this.record.id
  }

  get traceId() {
    return this.run.id
  }

  end(options?: SpanEndOptions): void {
    try {
      this.endAt(Date.now(), options ?? {})
    } catch (cause) {
      this.run.host.report(
        new TapedeckError("could not record the end of a span", { operation: "record", traceId: this.run.id, cause })
      )
    }
  }

  /** @internal */
  endAt(now: number, options: SpanEndOptions): void {
    if (this.ended || this.startParts === undefined) return
    this.ended = true
    this.record.ended = true
    const limit = this.run.host.maxPayloadChars
    const endMetadata = toJsonObject(options.metadata, limit)
    const metadata = this.startMetadata || endMetadata ? { ...this.startMetadata, ...endMetadata } : undefined
    const started = this.startedAt
    const ended = Math.max(now, started)
    this.record.json = fromParts([
      ...this.startParts,
      part("metadata", metadata),
      part("output", toJsonSafe(options.output, limit)),
      part("input_tokens", toCount(options.inputTokens)),
      part("output_tokens", toCount(options.outputTokens)),
      part("cost", toAmount(options.cost)),
      part("error", optionalText(options.error, TEXT_LIMITS.error)),
      part("ended_at", isoOf(ended)),
      part("duration_ms", ended - started)
    ])
    this.startParts = undefined
    this.startMetadata = undefined
    this.run.spanEnded(this)
  }

  startSpan(options: Omit<SpanOptions, "parent">): SpanHandle {
    return this.run.startSpan({ ...options, parent: this })
  }
}

/** A span that records nothing (its run is finished, its client closed). */
class InertSpan implements SpanHandle {
  readonly ended = true
  constructor(
    readonly id: string,
    readonly traceId: string,
    readonly type: SpanType,
    readonly name: string,
    private readonly run: RunImpl
  ) {}
  end(): void {}
  startSpan(options: Omit<SpanOptions, "parent">): SpanHandle {
    return this.run.startSpan({ ...options, parent: this.id })
  }
}

type CreateState = "todo" | "done" | "failed"

interface FinishRequest {
  readonly body: string
  readonly promise: Promise<void>
  readonly resolve: () => void
  sent: boolean
}

export class RunImpl implements Run {
  readonly id: string
  private readonly startedAt = Date.now()
  private readonly createBody: string
  private createState: CreateState = "todo"
  private readonly records = new Map<string, SpanRecord>()
  private readonly open = new Set<SpanImpl>()
  /** Spans waiting to be sent, in queue order. */
  private readonly queue = new Set<SpanRecord>()
  private finishing: FinishRequest | undefined
  private current: Promise<void> | undefined
  private next: Promise<void> | undefined

  constructor(
    readonly host: RunHost,
    options: RunOptions
  ) {
    let id = options.id
    if (id !== undefined && !isUuid(id)) {
      host.report(
        new TapedeckError(`run id ${JSON.stringify(String(id))} is not a UUID: a random id is used instead`, {
          operation: "record"
        })
      )
      id = undefined
    }
    this.id = (id ?? randomUuid()).toLowerCase()
    let projectId = options.projectId
    if (projectId !== undefined && !isUuid(projectId)) {
      host.report(
        new TapedeckError(`projectId ${JSON.stringify(String(projectId))} is not a UUID: left out`, {
          operation: "record",
          traceId: this.id
        })
      )
      projectId = undefined
    }
    const limit = host.maxPayloadChars
    this.createBody = fromParts([
      part("id", this.id),
      part("started_at", isoOf(this.startedAt)),
      part("status", "running"),
      part("name", optionalText(options.name, TEXT_LIMITS.name)),
      part("input", toJsonSafe(options.input, limit)),
      part("session_id", optionalText(options.sessionId, TEXT_LIMITS.session)),
      part("project_id", projectId),
      part("metadata", toJsonObject(options.metadata, limit))
    ])
  }

  get finished() {
    return this.finishing !== undefined
  }

  /** Whether the interval flush has something to do for this run. */
  get wantsPass() {
    return this.queue.size > 0 || this.createState === "todo" || (this.finishing !== undefined && !this.finishing.sent)
  }

  get queued() {
    return this.queue.size
  }

  startSpan(options: SpanOptions): SpanHandle {
    try {
      return this.startSpanUnsafe(options ?? ({} as SpanOptions))
    } catch (cause) {
      this.host.report(new TapedeckError("could not record a span", { operation: "record", traceId: this.id, cause }))
      return new InertSpan(randomUuid(), this.id, "action", "unrecorded", this)
    }
  }

  private startSpanUnsafe(options: SpanOptions): SpanHandle {
    let type = options.type
    if (!(SPAN_TYPES as ReadonlyArray<string>).includes(type)) {
      this.host.report(
        new TapedeckError(`unknown span type ${JSON.stringify(String(type))}: recorded as "action"`, {
          operation: "record",
          traceId: this.id
        })
      )
      type = "action"
    }
    const id = randomUuid()
    if (this.finishing !== undefined || this.host.closed) {
      this.host.countDropped(1)
      const why = this.host.closed ? "the client is closed" : "the run is finished"
      this.host.report(
        new TapedeckError(`span ${JSON.stringify(String(options.name))} not recorded: ${why}`, {
          operation: "record",
          traceId: this.id,
          spanCount: 1
        })
      )
      return new InertSpan(id, this.id, type, String(options.name), this)
    }
    const { parentId, parent } = this.resolveParent(options.parent)
    const record: SpanRecord = {
      id,
      parentId,
      parent,
      json: undefined,
      ended: false,
      stored: false,
      rejected: false,
      pending: false
    }
    const span = new SpanImpl(this, record, options, type)
    this.records.set(id, record)
    this.open.add(span)
    this.enqueue(record)
    return span
  }

  private resolveParent(parent: SpanOptions["parent"]): { parentId: string | null; parent: SpanRecord | undefined } {
    if (parent === undefined || parent === null) return { parentId: null, parent: undefined }
    if (parent instanceof SpanImpl && parent.traceId === this.id) return { parentId: parent.id, parent: parent.record }
    if (typeof parent !== "string") {
      this.host.report(
        new TapedeckError("parent is not a span of this run: the span is recorded as a root", {
          operation: "record",
          traceId: this.id
        })
      )
      return { parentId: null, parent: undefined }
    }
    const id = parent
    if (!isUuid(id)) {
      this.host.report(
        new TapedeckError(`parent ${JSON.stringify(String(id))} is not a span id: the span is recorded as a root`, {
          operation: "record",
          traceId: this.id
        })
      )
      return { parentId: null, parent: undefined }
    }
    const lower = id.toLowerCase()
    return { parentId: lower, parent: this.records.get(lower) }
  }

  /** @internal */
  spanEnded(span: SpanImpl) {
    this.open.delete(span)
    this.enqueue(span.record)
  }

  private enqueue(record: SpanRecord) {
    if (record.pending) return
    if (record.rejected) {
      // Refused once (reported then): a later version would be refused too.
      this.host.countFailed(1)
      this.forget(record)
      return
    }
    if (this.host.closed || !this.host.claimSlot()) {
      this.host.countDropped(1)
      this.forget(record)
      return
    }
    record.pending = true
    this.queue.add(record)
    if (this.queue.size === 1) this.host.runActive(this)
    if (this.queue.size >= this.host.maxBatchSpans) void this.schedule()
  }

  /** Drops the snapshot of an ended span whose update is lost (an open span's is rebuilt at its end). */
  private forget(record: SpanRecord) {
    if (record.ended && !record.pending) record.json = undefined
  }

  private dequeue(record: SpanRecord) {
    if (!record.pending) return
    record.pending = false
    this.queue.delete(record)
    this.host.releaseSlots(1)
  }

  flush(): Promise<void> {
    try {
      return this.schedule()
    } catch {
      return Promise.resolve()
    }
  }

  finish(options: FinishOptions = {}): Promise<void> {
    try {
      if (this.finishing) return this.finishing.promise
      const now = Date.now()
      const opts = options ?? {}
      const status: RunStatus =
        opts.status === "completed" || opts.status === "failed"
          ? opts.status
          : opts.error !== undefined
            ? "failed"
            : "completed"
      for (const span of Array.from(this.open)) span.endAt(now, {})
      if (opts.error !== undefined) {
        const error = new SpanImpl(
          this,
          this.newRecord(),
          {
            type: "error",
            name: opts.error instanceof Error ? opts.error.name : "error",
            input: undefined
          },
          "error"
        )
        this.records.set(error.id, error.record)
        error.endAt(now, { error: opts.error })
      }
      let resolve!: () => void
      const promise = new Promise<void>((r) => (resolve = r))
      const body = fromParts([
        part("status", status),
        part("output", toJsonSafe(opts.output, this.host.maxPayloadChars)),
        part("ended_at", isoOf(now))
      ])
      this.finishing = { body, promise, resolve, sent: false }
      this.host.runActive(this)
      if (this.host.closed) {
        this.host.report(
          new TapedeckError("run not finished on the server: the client is closed", {
            operation: "finish_trace",
            traceId: this.id
          })
        )
        this.finishing.sent = true
        resolve()
        return promise
      }
      void this.schedule()
      return promise
    } catch (cause) {
      this.host.report(
        new TapedeckError("could not finish the run", { operation: "finish_trace", traceId: this.id, cause })
      )
      return Promise.resolve()
    }
  }

  private newRecord(): SpanRecord {
    return {
      id: randomUuid(),
      parentId: null,
      parent: undefined,
      json: undefined,
      ended: false,
      stored: false,
      rejected: false,
      pending: false
    }
  }

  /**
   * Starts a pass, or when one is under way, the one after it (which then covers everything queued now).
   * Never rejects.
   */
  schedule(): Promise<void> {
    if (this.current === undefined) {
      this.current = this.pass()
        .catch((cause) => {
          this.host.report(
            new TapedeckError("internal error while sending", { operation: "send_spans", traceId: this.id, cause })
          )
        })
        .finally(() => {
          this.current = undefined
          // An idle run is not held by the client: an abandoned one can be garbage-collected.
          if (!this.wantsPass) this.host.runSettled(this)
        })
      return this.current
    }
    this.next ??= this.current.then(() => {
      this.next = undefined
      return this.schedule()
    })
    return this.next
  }

  private async pass(): Promise<void> {
    const finishing = this.finishing !== undefined && !this.finishing.sent
    if (this.createState !== "done") {
      if (!(await this.createTrace())) {
        // Without the trace nothing else can land: what is queued now is lost.
        // (createTrace counted and reported them.)
        for (const record of Array.from(this.queue)) {
          this.dequeue(record)
          this.forget(record)
        }
        if (finishing) this.settleFinish()
        return
      }
    }
    // A finished run takes no new updates: drain it whole. Otherwise send what was queued at the start.
    let budget = finishing ? Number.POSITIVE_INFINITY : this.queue.size
    while (budget > 0 && this.queue.size > 0) {
      const batch = this.takeBatch()
      if (batch.length === 0) continue
      budget -= batch.length
      await this.sendBatch(batch)
    }
    if (finishing && this.finishing) {
      const result = await this.host.transport.send("PATCH", `/api/v1/traces/${this.id}`, this.finishing.body)
      if (!result.ok) this.fail("finish_trace", "could not finish the trace", result, 0)
      this.settleFinish()
    }
  }

  private settleFinish() {
    if (!this.finishing) return
    this.finishing.sent = true
    this.finishing.resolve()
  }

  private async createTrace(): Promise<boolean> {
    const result = await this.host.transport.send("POST", "/api/v1/traces", this.createBody)
    // 409: the id exists. Either an earlier attempt of ours landed though its answer was lost, or the
    // caller chose the id of an existing trace to record into; either way its spans go there.
    if (result.ok || result.status === 409) {
      this.createState = "done"
      return true
    }
    this.createState = "failed"
    this.fail("create_trace", "could not create the trace", result, this.queue.size)
    return false
  }

  /**
   * The next batch from the front of the queue: at most maxBatchSpans spans and about maxBatchChars,
   * each preceded by those of its ancestors the server does not have.
   */
  private takeBatch(): Entry[] {
    const entries: Entry[] = []
    const inBatch = new Set<SpanRecord>()
    let chars = 0
    let orphans = 0
    for (const record of this.queue) {
      const chain: SpanRecord[] = []
      let blocked = false
      for (let p = record.parent; p !== undefined && !p.stored && !inBatch.has(p); p = p.parent) {
        if (p.rejected || p.json === undefined) {
          blocked = true
          break
        }
        chain.push(p)
      }
      if (blocked) {
        // Its parent was refused by the server, or lost: the span would be refused.
        record.rejected = true
        this.dequeue(record)
        this.forget(record)
        orphans++
        continue
      }
      chain.reverse().push(record)
      const size = chain.reduce((n, r) => n + r.json!.length + 1, 0)
      if (
        entries.length > 0 &&
        (entries.length + chain.length > this.host.maxBatchSpans || chars + size > this.host.maxBatchChars)
      )
        break
      for (const r of chain.slice(0, this.host.maxBatchSpans - entries.length)) {
        entries.push({ record: r, json: r.json! })
        inBatch.add(r)
        chars += r.json!.length + 1
        this.dequeue(r)
      }
      if (entries.length >= this.host.maxBatchSpans || chars >= this.host.maxBatchChars) break
    }
    if (orphans > 0) {
      this.host.countFailed(orphans)
      this.host.report(
        new TapedeckError(`${orphans} span update(s) not sent: their parent span was refused by the server or lost`, {
          operation: "send_spans",
          traceId: this.id,
          spanCount: orphans
        })
      )
    }
    return entries
  }

  private async sendBatch(entries: ReadonlyArray<Entry>): Promise<void> {
    this.host.inFlight(entries.length)
    try {
      const body = `{"spans":[${entries.map((e) => e.json).join(",")}]}`
      const result = await this.host.transport.send("POST", `/api/v1/traces/${this.id}/spans`, body)
      if (result.ok) {
        for (const { record } of entries) {
          record.stored = true
          // Only a span the server lacks is ever re-sent from its snapshot: free it.
          if (!record.pending) record.json = undefined
        }
        this.host.countSent(entries.length)
        return
      }
      if (result.status === 400 && entries.length > 1) {
        // One unstorable span refuses the whole batch: halve it to lose only that span.
        const half = Math.ceil(entries.length / 2)
        this.host.inFlight(-entries.length)
        try {
          await this.sendBatch(entries.slice(0, half))
          await this.sendBatch(entries.slice(half))
        } finally {
          this.host.inFlight(entries.length)
        }
        return
      }
      if (result.status === 400) for (const { record } of entries) record.rejected = true
      for (const { record } of entries) this.forget(record)
      this.fail("send_spans", `could not send ${entries.length} span update(s)`, result, entries.length)
    } finally {
      this.host.inFlight(-entries.length)
    }
  }

  private fail(operation: Operation, what: string, result: SendResult, spanCount: number) {
    if (result.ok) return
    this.host.countFailed(spanCount)
    const status = result.status === undefined ? "" : ` (HTTP ${result.status}${result.code ? ` ${result.code}` : ""})`
    const retried = result.retryable && !result.skipped ? " after retries" : ""
    this.host.report(
      new TapedeckError(`${what}${retried}${status}: ${result.message}`, {
        operation,
        status: result.status,
        code: result.code,
        traceId: this.id,
        spanCount,
        cause: result.cause
      })
    )
  }
}
