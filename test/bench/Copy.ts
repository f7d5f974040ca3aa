/**
 * The bare-PostgreSQL ceiling the ingest benchmarks compare against: `COPY ... FROM STDIN` through pg's Client
 * (no pg-copy-streams dependency), timed batch by batch over several connections.
 */
import type pg from "pg"
import { connectMany, type CoresBusy, type CpuMeter } from "./Harness.ts"

/** `value` in COPY's text format: backslash, tab, newline and carriage return escaped; null/undefined as \N; objects as JSON. */
export const copyText = (value: unknown): string => {
  if (value === null || value === undefined) return "\\N"
  const s = typeof value === "string" ? value : typeof value === "object" ? JSON.stringify(value) : String(value)
  return /[\\\t\n\r]/.test(s)
    ? s.replace(/\\/g, "\\\\").replace(/\t/g, "\\t").replace(/\n/g, "\\n").replace(/\r/g, "\\r")
    : s
}

/** The part of pg's (untyped) Connection that a COPY FROM uses. */
interface PgConnection {
  query(text: string): void
  sendCopyFromChunk(chunk: Buffer): void
  endCopyFrom(): void
}

/** A `COPY ... FROM STDIN` for pg's Client (its "submittable" protocol, as pg-copy-streams uses): the payload goes in one CopyData message. */
export class CopyFrom {
  callback: ((err: Error | null, rows?: number) => void) | undefined
  private rows = 0
  private done = false
  constructor(private readonly text: string, private readonly data: Buffer) {}
  /** Runs COPY `text` with `data` (COPY text rows) on `client`; resolves to the rows copied, rejects on any error. */
  static run(client: pg.Client, text: string, data: string) {
    return new Promise<number>((ok, fail) => {
      const copy = new CopyFrom(text, Buffer.from(data))
      copy.callback = (err, rows) => (err ? fail(err) : ok(rows ?? 0))
      client.query(copy as unknown as pg.QueryConfig)
    })
  }
  submit(connection: PgConnection) {
    connection.query(this.text)
  }
  handleCopyInResponse(connection: PgConnection) {
    connection.sendCopyFromChunk(this.data)
    connection.endCopyFrom()
  }
  handleCommandComplete(msg: { text?: string }) {
    this.rows = Number(msg.text?.split(" ").at(-1) ?? 0)
  }
  private finish(err: Error | null) {
    if (this.done) return
    this.done = true
    this.callback?.(err, this.rows)
  }
  // An error (from the server, or the connection lost) settles at once, as pg-copy-streams does.
  handleError(err: Error) {
    this.finish(err)
  }
  handleReadyForQuery() {
    this.finish(null)
  }
  // Not expected for COPY FROM; present so an unexpected message cannot crash the client.
  handleRowDescription() {}
  handleDataRow() {}
  handleEmptyQuery() {}
  handlePortalSuspended() {}
  handleCopyData() {}
}

/** What a `copyCeiling` measured: COPYs done, rows copied, seconds, per-COPY latencies (ms) and cores busy. */
export interface CopyCeiling {
  readonly batches: number
  readonly rows: number
  readonly seconds: number
  readonly latencies: Array<number>
  readonly cpu: CoresBusy
}

/** `batches` COPYs (`text`, rows from `batch()`) over `concurrency` fresh connections after one unmeasured COPY on each; the connections are always closed. */
export const copyCeiling = async (options: {
  readonly databaseUrl: string
  readonly serverPid: number
  readonly cpu: CpuMeter
  readonly text: string
  readonly batches: number
  readonly concurrency: number
  readonly batch: () => string
}): Promise<CopyCeiling> => {
  const { text, batches, batch, cpu: meter, serverPid } = options
  const clients = await connectMany(options.databaseUrl, options.concurrency)
  try {
    // Warm-up on every connection, then measure.
    await Promise.all(clients.map((c) => CopyFrom.run(c, text, batch())))
    const latencies: Array<number> = []
    let next = 0
    let rows = 0
    const cpu0 = meter.snapshot(serverPid) // before the connections close: an exited backend's CPU is gone
    const start = performance.now()
    await Promise.all(clients.map(async (client) => {
      while (next < batches) {
        next++
        const data = batch()
        const t0 = performance.now()
        const copied = await CopyFrom.run(client, text, data) // not `rows += await`: that reads `rows` first
        rows += copied
        latencies.push(performance.now() - t0)
      }
    }))
    const seconds = (performance.now() - start) / 1000
    const cpu = meter.busy(cpu0, meter.snapshot(serverPid))
    return { batches: latencies.length, rows, seconds, latencies, cpu }
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})))
  }
}
