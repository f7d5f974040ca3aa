import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Option, PubSub } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { groupEventCount, MAX_EVENTS_PER_ROW, type StreamGroup, storedGroup } from "#src/domain/StreamEvent"

/** The NOTIFY channel of the live span stream; payloads are `account id:row id,row id…` (never data). */
export const STREAM_CHANNEL = "tapedeck_stream"

/** A committed (or about to be committed) write: the stream_events rows of one account. */
export interface StreamNotice {
  readonly accountId: string
  readonly rowIds: ReadonlyArray<number>
}

export const parseNotice = (payload: string): StreamNotice | undefined => {
  const colon = payload.indexOf(":")
  if (colon <= 0) return undefined
  const rowIds = payload
    .slice(colon + 1)
    .split(",")
    .map(Number)
    .filter((n) => Number.isSafeInteger(n) && n > 0)
  return rowIds.length === 0 ? undefined : { accountId: payload.slice(0, colon), rowIds }
}

/** The rows of a write as `inStatement` inserts them: each group in its stored form (`storedGroup`). */
const storedRows = (groups: ReadonlyArray<StreamGroup>) =>
  JSON.stringify(packRows(groups).map((row) => ({ groups: row.groups.map(storedGroup), events: row.events })))

/** Splits a write's groups into rows of at most MAX_EVENTS_PER_ROW events (a huge group is split too). */
export const packRows = (groups: ReadonlyArray<StreamGroup>) => {
  const rows: Array<{ groups: Array<StreamGroup>; events: number }> = []
  let current: { groups: Array<StreamGroup>; events: number } = { groups: [], events: 0 }
  const push = (group: StreamGroup) => {
    const n = groupEventCount(group)
    if (n === 0) return
    if (current.events + n > MAX_EVENTS_PER_ROW && current.events > 0) {
      rows.push(current)
      current = { groups: [], events: 0 }
    }
    current.groups.push(group)
    current.events += n
  }
  for (const group of groups) {
    if (groupEventCount(group) <= MAX_EVENTS_PER_ROW) {
      push(group)
      continue
    }
    const chunk = MAX_EVENTS_PER_ROW - 2
    for (let i = 0; i < group.s.length; i += chunk) {
      const last = i + chunk >= group.s.length
      push({
        t: group.t,
        ...(i === 0 && group.b ? { b: group.b } : {}),
        s: group.s.slice(i, i + chunk),
        ...(last && group.a ? { a: group.a } : {})
      })
    }
  }
  if (current.events > 0) rows.push(current)
  return rows
}

/** What a statement using `inStatement` selects (evaluating the NOTIFY), and its row's shape. */
export const STREAM_RESULT_COLUMNS = `(SELECT array_agg(id::float8 ORDER BY id) FROM stream_rows) AS stream_row_ids,
  (SELECT count(*) FROM stream_notice)::int AS stream_notified`
export interface StreamResultColumns {
  readonly stream_row_ids: ReadonlyArray<number | string> | null
}

/**
 * The write side of the live span stream. `record` runs inside the writer's transaction: one INSERT of the
 * changed ids, and (PostgreSQL) one NOTIFY in the same statement, which PostgreSQL delivers only on commit.
 * The NOTIFY is made only when an instance has a live subscriber of the account (`stream_listeners`, kept by
 * StreamHub): a notifying commit takes a database-wide lock until its WAL is flushed, so notifying every write
 * would serialize all ingestion whether anyone watches or not. The log rows are written either way (replay).
 * Embedded PGlite has one connection and one process: the notice is published in process, and the reader's
 * query waits for the writer's transaction to release the connection, so it sees the committed rows.
 */
export class StreamEvents extends Effect.Service<StreamEvents>()("tapedeck/StreamEvents", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    const local = yield* PubSub.unbounded<StreamNotice>()

    /**
     * For a writer that folds its stream rows into its own single statement (atomic without a transaction):
     * CTEs that insert the rows only when the CTE named `gate` has a row, and NOTIFY their ids. The statement
     * must select `STREAM_RESULT_COLUMNS`; hand the row to `published` once the statement has run.
     */
    const inStatement = (accountId: AccountId, groups: ReadonlyArray<StreamGroup>, gate: string) =>
      sql`, stream_rows AS (
          INSERT INTO stream_events (account_id, groups, events)
          SELECT ${accountId}::uuid, e.value->'groups', (e.value->>'events')::int
          FROM ${sql.literal(gate)}, jsonb_array_elements(${storedRows(groups)}::jsonb) WITH ORDINALITY AS e(value, ord)
          ORDER BY e.ord
          RETURNING id
        ), stream_notice AS (
          SELECT pg_notify(${STREAM_CHANNEL}, ${accountId}::text || ':' || string_agg(id::text, ',' ORDER BY id)) AS sent
          FROM stream_rows
          HAVING count(*) > 0 AND EXISTS (SELECT 1 FROM stream_listeners WHERE account_id = ${accountId}::uuid)
        )`

    /** Embedded PGlite has no other instance to tell: the notice of a committed `inStatement` write goes in process. */
    const published = (accountId: AccountId, row: StreamResultColumns) =>
      Option.isSome(pg) || row.stream_row_ids === null || row.stream_row_ids.length === 0
        ? Effect.void
        : PubSub.publish(local, { accountId, rowIds: row.stream_row_ids.map(Number) })

    /** The rows of one write, as a statement of their own (inside the writer's transaction). */
    const record = Effect.fn("StreamEvents.record")(
      function* (accountId: AccountId, groups: ReadonlyArray<StreamGroup>) {
        if (packRows(groups).length === 0) return
        const rows = yield* sql<StreamResultColumns>`
          WITH stream_gate AS (SELECT 1)${inStatement(accountId, groups, "stream_gate")}
          SELECT ${sql.literal(STREAM_RESULT_COLUMNS)}`
        yield* published(accountId, rows[0]!)
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    return { record, inStatement, published, local, distributed: Option.isSome(pg) } as const
  })
}) {}
