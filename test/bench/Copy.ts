/**
 * The bare-PostgreSQL ceiling the ingest benchmarks compare against: `COPY ... FROM STDIN` through pg's Client
 * (the server's own CopyFrom), timed batch by batch over several connections.
 */
import { CopyData, CopyFrom } from "#layers/storage/PgCopy"
import { connectMany, type CoresBusy, type CpuMeter } from "./Harness.ts"

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
    await Promise.all(clients.map((c) => CopyFrom.run(c, text, CopyData.of(batch()))))
    const latencies: Array<number> = []
    let next = 0
    let rows = 0
    const cpu0 = meter.snapshot(serverPid) // before the connections close: an exited backend's CPU is gone
    const start = performance.now()
    await Promise.all(
      clients.map(async (client) => {
        while (next < batches) {
          next++
          const data = CopyData.of(batch())
          const t0 = performance.now()
          const copied = await CopyFrom.run(client, text, data) // not `rows += await`: that reads `rows` first
          rows += copied
          latencies.push(performance.now() - t0)
        }
      })
    )
    const seconds = (performance.now() - start) / 1000
    const cpu = meter.busy(cpu0, meter.snapshot(serverPid))
    return { batches: latencies.length, rows, seconds, latencies, cpu }
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})))
  }
}
