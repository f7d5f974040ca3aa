import { SqlClient, SqlError } from "@effect/sql"
import { Effect, Option } from "effect"

const COPY_ESCAPES: Readonly<Record<string, string>> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" }

/** `value` in COPY's text format: backslash, tab, newline and carriage return escaped; null/undefined as \N; objects as JSON. */
export const copyText = (value: unknown): string => {
  if (value === null || value === undefined) return "\\N"
  if (typeof value === "object") return copyJson(value)
  const s = typeof value === "string" ? value : String(value)
  return /[\\\t\n\r]/.test(s) ? s.replace(/[\\\t\n\r]/g, (c) => COPY_ESCAPES[c]!) : s
}

/**
 * The JSON text of `value` in COPY's text format. JSON.stringify leaves no raw tab, newline or carriage return (it
 * escapes every control character), so only backslashes need doubling.
 */
export const copyJson = (value: unknown): string => {
  const s = JSON.stringify(value) ?? "null"
  return s.includes("\\") ? s.replaceAll("\\", "\\\\") : s
}

/**
 * A PostgreSQL text[] literal in COPY's text format, each element escaped once: quoted with `\` and `"` escaped for
 * the array, then backslashes doubled and tab, newline and carriage return escaped for COPY. A null element is NULL.
 * What `copyText(textArray(values))` gives, with nulls allowed, without escaping the joined literal a second time.
 */
export const copyTextArray = (values: ReadonlyArray<string | null>): string => {
  let out = "{"
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ","
    const v = values[i]!
    if (v === null) {
      out += "NULL"
      continue
    }
    let e = v.includes("\\") ? v.replaceAll("\\", "\\\\\\\\") : v
    if (e.includes('"')) e = e.replaceAll('"', '\\\\"')
    if (/[\t\n\r]/.test(e)) e = e.replace(/[\t\n\r]/g, (c) => COPY_ESCAPES[c]!)
    out += `"${e}"`
  }
  return `${out}}`
}

/**
 * COPY text rows encoded to UTF-8 as they are added, into one buffer that is already the protocol's CopyData message.
 * Building one large string first and encoding it at the end cost more than the rows themselves (the concatenated
 * string is flattened, then copied into a Buffer, then copied again into node-postgres's writer).
 */
export class CopyData {
  private buffer: Buffer
  private length = 5
  constructor(capacity = 64 * 1024) {
    // allocUnsafeSlow: never a slice of the shared pool, so a message can be moved to another thread whole.
    this.buffer = Buffer.allocUnsafeSlow(Math.max(capacity, 64))
  }
  static of(rows: string) {
    const data = new CopyData(rows.length * 3 + 5)
    data.add(rows)
    return data
  }
  /** Makes room for `units` more UTF-16 code units (UTF-8 takes at most 3 bytes for each). */
  private reserve(units: number) {
    const needed = this.length + units * 3
    if (needed <= this.buffer.length) return
    const grown = Buffer.allocUnsafeSlow(Math.max(needed, this.buffer.length * 2))
    this.buffer.copy(grown, 0, 0, this.length)
    this.buffer = grown
  }
  /** Appends `rows` (complete lines, each ending in a newline). */
  add(rows: string) {
    this.reserve(rows.length)
    this.length += this.buffer.write(rows, this.length)
  }
  /** Appends one row of fields already in COPY's text form (tab-separated, newline-terminated), each written in place. */
  addRow(fields: ReadonlyArray<string>) {
    if (fields.length === 0) return this.add("\n")
    let units = fields.length
    for (const field of fields) units += field.length
    this.reserve(units)
    for (const field of fields) {
      this.length += this.buffer.write(field, this.length)
      this.buffer[this.length++] = 0x09 // tab
    }
    this.buffer[this.length - 1] = 0x0a // the last tab becomes the row's newline
  }
  /** The CopyData message: 'd', the length (itself included), the rows. */
  message(): Buffer {
    this.buffer[0] = 0x64
    this.buffer.writeInt32BE(this.length - 1, 1)
    return this.buffer.subarray(0, this.length)
  }
}

/** What a COPY FROM sends: one CopyData message holding every row. */
export interface CopyMessage {
  message(): Uint8Array
}

/** A CopyData message built elsewhere (e.g. on another thread, by `CopyData.message`). */
export const copyMessage = (message: Uint8Array): CopyMessage => ({ message: () => message })

/** The part of node-postgres's (untyped) Connection that a COPY FROM uses. */
interface PgConnection {
  readonly stream: {
    readonly writable: boolean
    write(chunk: Uint8Array): boolean
    cork?(): void
    uncork?(): void
  }
  query(text: string): void
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
  constructor(
    private readonly text: string,
    private readonly data: CopyMessage
  ) {}
  /** Runs COPY `text` with `data` (COPY text rows) on `client`; resolves to the rows copied, rejects on any error. */
  static run(client: PgQueryable, text: string, data: CopyMessage) {
    return new Promise<number>((ok, fail) => {
      const copy = new CopyFrom(text, data)
      copy.callback = (err, rows) => (err ? fail(err) : ok(rows ?? 0))
      client.query(copy)
    })
  }
  submit(connection: PgConnection) {
    connection.query(this.text)
  }
  // The message goes to the socket as built (what sendCopyFromChunk does after copying it into its own writer), and
  // CopyDone with it in one write (corked, as node-postgres sends a query's messages): a write to the database's
  // socket is a system call that can hand the core to the backend it wakes.
  handleCopyInResponse(connection: PgConnection) {
    const { stream } = connection
    stream.cork?.()
    try {
      if (stream.writable) stream.write(this.data.message())
      connection.endCopyFrom()
    } finally {
      stream.uncork?.()
    }
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
export const copyInTransaction = (text: string, rows: () => CopyMessage) =>
  Effect.flatMap(transactionClient, (client) =>
    Option.isNone(client)
      ? Effect.succeed(Option.none<number>())
      : Effect.tryPromise({
          try: () => CopyFrom.run(client.value, text, rows()),
          catch: (cause) => new SqlError.SqlError({ cause, message: "COPY failed" })
        }).pipe(Effect.map(Option.some))
  )
