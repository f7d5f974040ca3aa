import { Reactivity } from "@effect/experimental"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Option, PubSub, Queue, Schedule, Stream } from "effect"
import type { AccountId } from "#src/domain/Ids"
import {
  EVENT_ID_STRIDE,
  readStoredGroup,
  type StoredStreamGroup,
  spanCode,
  type StreamFilters,
  type StreamGroup
} from "#src/domain/StreamEvent"
import { AppConfig } from "../config/AppConfig.ts"
import { SPAN_PARTS_SELECT, spanJsonRow, type SpanPartsRow } from "../traces/SpanRecords.ts"
import { withPayloads } from "../traces/SharedParts.ts"
import { toTrace, TRACE_SELECT, type TraceRow } from "../traces/TraceRepo.ts"
import { parseNotice, STREAM_CHANNEL, StreamEvents, type StreamNotice } from "./StreamEvents.ts"
import { uuidArray } from "../storage/SqlArrays.ts"
import { streamListeners } from "./StreamListeners.ts"

/** One event ready to send: what filters look at, and its JSON text (serialised once for every subscriber). */
export interface Delivered {
  readonly id: number
  readonly rowId: number
  readonly accountId: string
  readonly traceId: string
  readonly kind: "span" | "trace"
  readonly spanType: string | undefined
  readonly projectId: string | null
  readonly sessionId: string | null
  readonly json: string
}

/** A connection's subscription. `push` answers false when its bounded queue is full. */
export interface Subscriber {
  readonly accountId: AccountId
  filters: StreamFilters | undefined
  /** While a replay is being read, live events wait here (bounded like the queue). */
  pending: Array<Delivered> | undefined
  /** Sends or queues the events, in order (one call per batch, so the socket can write them together). */
  readonly push: (events: ReadonlyArray<Delivered>) => boolean
  readonly overflow: () => void
}

interface Audience {
  readonly filters: StreamFilters
  readonly members: Array<Subscriber>
  readonly events: Array<Delivered>
}

interface EventRow {
  readonly id: number
  readonly account_id: string
  readonly groups: ReadonlyArray<StreamGroup>
}

/** A row as read from `stream_events`: its groups in the stored form. */
type StoredEventRow = Omit<EventRow, "groups"> & { readonly groups: ReadonlyArray<StoredStreamGroup> }

const eventRows = (rows: ReadonlyArray<StoredEventRow>) =>
  rows.map((r): EventRow => ({ ...r, groups: r.groups.map(readStoredGroup) }))

interface TraceFacts {
  readonly accountId: string
  readonly projectId: string | null
  readonly sessionId: string | null
}

const traceLevelMatch = (filters: StreamFilters, traceId: string, facts: TraceFacts) =>
  (filters.trace_id === undefined || filters.trace_id === traceId) &&
  (filters.project_id === undefined || filters.project_id === facts.projectId) &&
  (filters.session_id === undefined || filters.session_id === facts.sessionId)

/** Every given filter matches; `span_type` admits only span events of that type. */
export const matches = (filters: StreamFilters, event: Delivered) =>
  traceLevelMatch(filters, event.traceId, event) &&
  (filters.span_type === undefined || (event.kind === "span" && event.spanType === filters.span_type))

/** Write batches an instance may have heard of but not yet delivered. */
const INBOX_MAX_NOTICES = 10_000

/**
 * The read side of the live span stream, one per instance: it learns of committed writes (PostgreSQL
 * LISTEN/NOTIFY across instances, or in process with embedded PGlite), reads the changed traces and spans
 * once per batch of notices, and fans the events out to the subscribers of their account, in commit order.
 * Also replays recent events to reconnecting clients and prunes the event log.
 */
export class StreamHub extends Effect.Service<StreamHub>()("tapedeck/StreamHub", {
  scoped: Effect.gen(function* () {
    const config = yield* AppConfig
    const events = yield* StreamEvents
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    // Delivery reads through two connections of its own: under write load the shared pool is full of write
    // transactions, and waiting behind them would add their latency to every event.
    const sql: SqlClient.SqlClient =
      Option.isSome(pg) && Option.isSome(config.databaseUrl)
        ? yield* PgClient.make({
            url: config.databaseUrl.value,
            maxConnections: 2,
            applicationName: "tapedeck-stream"
          }).pipe(Effect.provide(Reactivity.layer), Effect.orDie)
        : yield* SqlClient.SqlClient
    const subscribers = new Map<string, Set<Subscriber>>()
    // The accounts watched here, in stream_listeners (PostgreSQL only: with PGlite notices go in process). Changed
    // under one permit, so that a register and an unregister of the same account cannot undo each other.
    const listeners = Option.isSome(pg) ? Option.some(streamListeners(sql, crypto.randomUUID())) : Option.none()
    const listenerPermit = yield* Effect.makeSemaphore(1)

    /** Reads the data of these event rows (in the given order) and builds their events. */
    const load = (
      rows: ReadonlyArray<EventRow>,
      wanted: (accountId: string, traceId: string, facts: TraceFacts) => boolean
    ) =>
      Effect.gen(function* () {
        const traceIds = new Set<string>()
        for (const row of rows) for (const group of row.groups) traceIds.add(group.t)
        if (traceIds.size === 0) return []
        // Deleted traces are read too, for their `deleted` event (their other events are no longer delivered).
        const traceRows = yield* sql<TraceRow & { account_id: string; is_deleted: boolean }>`
          SELECT account_id, deleted_at IS NOT NULL AS is_deleted, ${sql.literal(TRACE_SELECT)} FROM traces
          WHERE id = ANY(${uuidArray(traceIds)}::uuid[])`
        const traces = new Map(traceRows.map((r) => [r.id, r]))
        const pairs: Array<{ p_t: string; p_s: string }> = []
        const accepted = new Set<string>()
        for (const row of rows) {
          for (const group of row.groups) {
            const trace = traces.get(group.t)
            if (!trace || trace.account_id !== row.account_id) continue
            const facts = { accountId: row.account_id, projectId: trace.project_id, sessionId: trace.session_id }
            if (!wanted(row.account_id, group.t, facts)) continue
            accepted.add(`${row.id}/${group.t}`)
            if (!trace.is_deleted) for (const [spanId] of group.s) pairs.push({ p_t: group.t, p_s: spanId })
          }
        }
        const spans = new Map<string, SpanPartsRow>()
        if (pairs.length > 0) {
          // Payloads as PostgreSQL prints them, passed into each event's JSON unparsed (one text per span, sent to every subscriber).
          const spanRows = yield* sql<SpanPartsRow & { trace_id: string }>`
            SELECT trace_id, ${sql.literal(SPAN_PARTS_SELECT)} FROM spans
            WHERE (trace_id, id) IN (
              SELECT p_t, p_s FROM jsonb_to_recordset(${JSON.stringify(pairs)}::jsonb) AS p(p_t uuid, p_s uuid))`
          for (const r of yield* withPayloads(sql, spanRows)) spans.set(`${r.trace_id}/${r.id}`, r)
        }
        const out: Array<Delivered> = []
        for (const row of rows) {
          let position = 0
          for (const group of row.groups) {
            const base = row.id * EVENT_ID_STRIDE
            const trace = traces.get(group.t)
            const accept = accepted.has(`${row.id}/${group.t}`) && trace !== undefined
            const ok = accept && !trace.is_deleted
            const common = {
              rowId: row.id,
              accountId: row.account_id,
              traceId: group.t,
              projectId: trace?.project_id ?? null,
              sessionId: trace?.session_id ?? null
            }
            const traceEvent = (event: string, id: number): Delivered => ({
              ...common,
              id,
              kind: "trace",
              spanType: undefined,
              json: JSON.stringify({
                type: "trace",
                event,
                id,
                trace_id: group.t,
                data: event === "deleted" ? { id: group.t } : toTrace(trace!)
              })
            })
            if (group.b) {
              if (ok) out.push(traceEvent(group.b, base + position))
              position++
            }
            for (const [spanId, code] of group.s) {
              const span = ok ? spans.get(`${group.t}/${spanId}`) : undefined
              if (span) {
                const id = base + position
                out.push({
                  ...common,
                  id,
                  kind: "span",
                  spanType: span.span_type,
                  json: `{"type":"span","event":${JSON.stringify(spanCode(code))},"id":${id},"trace_id":"${group.t}","data":${
                    spanJsonRow(span).json
                  }}`
                })
              }
              position++
            }
            if (group.a) {
              if (group.a === "deleted" ? accept : ok) out.push(traceEvent(group.a, base + position))
              position++
            }
          }
        }
        return out
      })

    const deliver = (subscriber: Subscriber, events: ReadonlyArray<Delivered>) => {
      if (subscriber.pending) {
        // Checked before copying: a replaying client never holds more than the bound.
        if (subscriber.pending.length + events.length > config.streamQueueMax) subscriber.overflow()
        else for (const event of events) subscriber.pending.push(event)
      } else if (!subscriber.push(events)) subscriber.overflow()
    }

    const wantedLive = (accountId: string, traceId: string, facts: TraceFacts) => {
      for (const s of subscribers.get(accountId) ?? []) {
        if (s.filters && traceLevelMatch(s.filters, traceId, facts)) return true
      }
      return false
    }

    const dispatch = (notices: ReadonlyArray<StreamNotice>) =>
      Effect.gen(function* () {
        const ids: Array<number> = []
        for (const n of notices) if ((subscribers.get(n.accountId)?.size ?? 0) > 0) ids.push(...n.rowIds)
        if (ids.length === 0) return
        const rows = eventRows(
          yield* sql<StoredEventRow>`
          SELECT id::float8 AS id, account_id, groups FROM stream_events WHERE id = ANY(${`{${ids.join(",")}}`}::bigint[])`
        )
        // Commit order (the order of the notices), not id order: ids are taken before commit.
        const byId = new Map(rows.map((r) => [r.id, r]))
        const ordered = ids.flatMap((id) => byId.get(id) ?? [])
        // Subscribers with the same filters form one audience: each event is matched once per audience, and its
        // members share one list of the already serialised events.
        const audiences = new Map<string, Array<Audience>>()
        const audiencesOf = (accountId: string) => {
          const known = audiences.get(accountId)
          if (known) return known
          const byFilters = new Map<string, Audience>()
          for (const s of subscribers.get(accountId) ?? []) {
            if (!s.filters) continue
            const key = JSON.stringify(s.filters)
            const audience = byFilters.get(key)
            if (audience) audience.members.push(s)
            else byFilters.set(key, { filters: s.filters, members: [s], events: [] })
          }
          const list = [...byFilters.values()]
          audiences.set(accountId, list)
          return list
        }
        for (const event of yield* load(ordered, wantedLive)) {
          for (const audience of audiencesOf(event.accountId)) {
            if (matches(audience.filters, event)) audience.events.push(event)
          }
        }
        for (const list of audiences.values()) {
          for (const { members, events } of list) {
            if (events.length > 0) for (const s of members) deliver(s, events)
          }
        }
      })

    // Bounded: an instance that falls this far behind drops the notice and closes every live subscriber as a slow
    // consumer (4008), who resumes with last_event_id from the durable event log, rather than buffering without end.
    const inbox = yield* Queue.dropping<StreamNotice>(INBOX_MAX_NOTICES)
    const enqueue = (notice: StreamNotice) =>
      Queue.offer(inbox, notice).pipe(
        Effect.flatMap((accepted) =>
          accepted
            ? Effect.void
            : Effect.sync(() => {
                for (const set of subscribers.values()) for (const s of set) s.overflow()
              })
        )
      )
    if (Option.isSome(pg)) {
      yield* pg.value.listen(STREAM_CHANNEL).pipe(
        Stream.runForEach((payload) => {
          const notice = parseNotice(payload)
          return notice ? enqueue(notice) : Effect.void
        }),
        Effect.tapErrorCause((cause) => Effect.logWarning("stream listener stopped; reconnecting", cause)),
        Effect.retry(Schedule.spaced("1 second")),
        Effect.forkScoped
      )
    } else {
      const local = yield* PubSub.subscribe(events.local)
      yield* Queue.take(local).pipe(Effect.flatMap(enqueue), Effect.forever, Effect.forkScoped)
    }

    yield* Queue.takeBetween(inbox, 1, 1000).pipe(
      Effect.flatMap((chunk) => dispatch([...chunk])),
      Effect.catchAllCause((cause) => Effect.logWarning("stream delivery failed for a batch of writes", cause)),
      Effect.forever,
      Effect.forkScoped
    )

    // The log is kept for replay only; the newest row always stays, so replay can tell whether it lost rows.
    const prune = sql`
      DELETE FROM stream_events WHERE id IN (
        SELECT id FROM stream_events
        WHERE created_at < now() - make_interval(secs => ${config.streamRetentionSeconds})
          AND id < (SELECT max(id) FROM stream_events)
        LIMIT 10000)`
    yield* prune.pipe(
      Effect.zipRight(Option.match(listeners, { onNone: () => Effect.void, onSome: (l) => l.pruneStale })),
      Effect.catchAllCause((cause) => Effect.logWarning("stream log pruning failed", cause)),
      Effect.repeat(Schedule.spaced(`${Math.max(1, Math.min(60, config.streamRetentionSeconds / 2))} seconds`)),
      Effect.forkScoped
    )

    if (Option.isSome(listeners)) {
      const l = listeners.value
      // Kept fresh while watched (a row not refreshed for minutes is pruned as a dead instance's), released at shutdown.
      yield* Effect.suspend(() => l.listen([...subscribers.keys()])).pipe(
        listenerPermit.withPermits(1),
        Effect.catchAllCause((cause) => Effect.logWarning("stream listener refresh failed", cause)),
        Effect.repeat(Schedule.spaced("1 minute")),
        Effect.delay("1 minute"),
        Effect.forkScoped
      )
      yield* Effect.addFinalizer(() => l.release.pipe(Effect.timeout("2 seconds"), Effect.ignore))
    }

    /**
     * Adds the subscriber; once this returns, every write of its account that starts later NOTIFYs (a write already
     * running may not, and is then delivered only by replay: the stream is live from this point).
     */
    const register = (subscriber: Subscriber) =>
      Effect.gen(function* () {
        const set = subscribers.get(subscriber.accountId)
        if (set !== undefined) return void set.add(subscriber) // the account's row is already there (same permit)
        // Listed only once the row is committed: if that fails, the connection ends and nothing is left registered.
        if (Option.isSome(listeners)) yield* listeners.value.listen([subscriber.accountId])
        subscribers.set(subscriber.accountId, new Set([subscriber]))
      }).pipe(listenerPermit.withPermits(1), Effect.orDie)

    const unregister = (subscriber: Subscriber) =>
      Effect.gen(function* () {
        const set = subscribers.get(subscriber.accountId)
        set?.delete(subscriber)
        if (set?.size !== 0) return
        subscribers.delete(subscriber.accountId)
        if (Option.isSome(listeners)) {
          // Left in place if this fails: an extra NOTIFY costs writers a little, and the row is pruned in minutes.
          yield* listeners.value.unlisten(subscriber.accountId).pipe(Effect.ignore)
        }
      }).pipe(listenerPermit.withPermits(1))

    /**
     * Sets the subscriber's filters. With `lastEventId`, also reads the account's retained events after it
     * (at most `streamReplayMax`, the newest); live events meanwhile wait in `pending` until `endReplay`.
     */
    const subscribe = Effect.fn("StreamHub.subscribe")(
      function* (subscriber: Subscriber, filters: StreamFilters, lastEventId: number | undefined) {
        if (lastEventId === undefined) {
          subscriber.filters = filters
          return { events: [] as Array<Delivered>, replayedRows: new Set<number>(), complete: true }
        }
        subscriber.pending = subscriber.pending ?? []
        subscriber.filters = filters
        const lastRow = Math.floor(lastEventId / EVENT_ID_STRIDE)
        const rows = eventRows(
          yield* sql<StoredEventRow>`
          SELECT id::float8 AS id, account_id, groups FROM stream_events
          WHERE account_id = ${subscriber.accountId} AND id >= ${lastRow}
          ORDER BY id DESC LIMIT ${config.streamReplayMax}`
        ).reverse()
        const oldest = yield* sql<{ id: number | null }>`SELECT min(id)::float8 AS id FROM stream_events`
        const loaded = yield* load(rows, (_, traceId, facts) => traceLevelMatch(filters, traceId, facts))
        const after = loaded.filter((e) => e.id > lastEventId && matches(filters, e))
        const kept = after.slice(Math.max(0, after.length - config.streamReplayMax))
        const oldestId = oldest[0]?.id ?? null
        const complete =
          kept.length === after.length &&
          rows.length < config.streamReplayMax &&
          (oldestId === null || oldestId <= lastRow + 1)
        return { events: kept, replayedRows: new Set(rows.map((r) => r.id)), complete }
      },
      Effect.catchTags({ SqlError: Effect.die })
    )

    /** Live events that arrived during the replay, minus those the replay already covered. */
    const endReplay = (subscriber: Subscriber, replayedRows: ReadonlySet<number>) =>
      Effect.sync(() => {
        const pending = subscriber.pending ?? []
        subscriber.pending = undefined
        const fresh = pending.filter((event) => !replayedRows.has(event.rowId))
        if (fresh.length > 0 && !subscriber.push(fresh)) subscriber.overflow()
      })

    const subscriberCount = () => {
      let n = 0
      for (const set of subscribers.values()) n += set.size
      return n
    }

    return { register, unregister, subscribe, endReplay, subscriberCount } as const
  }),
  dependencies: [StreamEvents.Default, AppConfig.Default]
}) {}
