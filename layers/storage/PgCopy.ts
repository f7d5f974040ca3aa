import { SqlClient, SqlError } from "@effect/sql"
import { Effect, Option } from "effect"

/** `value` in COPY's text format: backslash, tab, newline and carriage return escaped; null/undefined as \N; objects as JSON. */
export const copyText = (value: unknown): string => {
  if (value === null || value === undefined) return "\\N"
  const s = typeof value === "string" ? value : typeof value === "object" ? JSON.stringify(value) : String(value)
  return /[\\\t\n\r]/.test(s)
    ? s.replace(/\\/g, "\\\\").replace(/\t/g, "\\t").replace(/\n/g, "\\n").replace(/\r/g, "\\r")
    : s
}

/** The part of node-postgres's (untyped) Connection that a COPY FROM uses. */
interface PgConnection {
  query(text: string): void
  sendCopyFromChunk(chunk: Buffer): void
  endCopyFrom(): void
}

/** The part of node-postgres's Client that runs a submittable. */
interface PgQueryable {
  query(submittable: unknown): unknown
}

/**
 * A `COPY ... FROM STDIN` for node-postgres's Client, through its "submittable" protocol (as pg-copy-streams uses it):
 * the payload goes in one CopyData message.
 */
export class CopyFrom {
  callback: ((err: Error | null, rows?: number) => void) | undefined
  private rows = 0
  private done = false
  constructor(private readonly text: string, private readonly data: Buffer) {}
  /** Runs COPY `text` with `data` (COPY text rows) on `client`; resolves to the rows copied, rejects on any error. */
  static run(client: PgQueryable, text: string, data: string) {
    return new Promise<number>((ok, fail) => {
      const copy = new CopyFrom(text, Buffer.from(data))
      copy.callback = (err, rows) => (err ? fail(err) : ok(rows ?? 0))
      client.query(copy)
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

/**
 * The node-postgres client of the current transaction, when there is one and it is one (@effect/sql-pg keeps the
 * reserved client as the transaction connection's `pg`); none on PGlite or outside a transaction.
 */
const transactionClient = Effect.map(
  Effect.serviceOption(SqlClient.TransactionConnection),
  Option.flatMap(([connection]) => {
    const pg = (connection as { readonly pg?: unknown }).pg
    return typeof pg === "object" && pg !== null && typeof (pg as PgQueryable).query === "function"
      ? Option.some(pg as PgQueryable)
      : Option.none()
  })
)

/**
 * `COPY text FROM STDIN` of `rows` (COPY text format, one line each) inside the current transaction: the rows copied,
 * or none when the transaction's connection cannot COPY (the caller writes them another way).
 */
export const copyInTransaction = (text: string, rows: () => string) =>
  Effect.flatMap(transactionClient, (client) =>
    Option.isNone(client)
      ? Effect.succeed(Option.none<number>())
      : Effect.tryPromise({
        try: () => CopyFrom.run(client.value, text, rows()),
        catch: (cause) => new SqlError.SqlError({ cause, message: "COPY failed" })
      }).pipe(Effect.map(Option.some)))
