import { Either, Schema } from "effect"
import { Span } from "../../../domain/Span.ts"
import { Trace } from "../../../domain/Trace.ts"

/** Subscription filters, as the stream's `subscribe` message takes them (src/domain/StreamEvent.ts). */
export interface LiveFilters {
  readonly trace_id?: string
  readonly project_id?: string
  readonly session_id?: string
}

/**
 * What a page hears: a span as the API sends it (checked against the encoded side of the contract's Span schema),
 * or a trace decoded by the contract's Trace schema (undefined for a deletion, whose data is only the id).
 */
export type LiveEvent =
  | { readonly type: "span"; readonly event: string; readonly traceId: string; readonly span: typeof Span.Encoded }
  | { readonly type: "trace"; readonly event: string; readonly traceId: string; readonly trace: Trace | undefined }

export type LiveState = "connecting" | "live" | "reconnecting" | "closed"

const isSpanWire = Schema.is(Schema.encodedSchema(Span))
const decodeTrace = Schema.decodeUnknownEither(Trace)

interface WireEvent {
  readonly type: string
  readonly event: string
  readonly id: number
  readonly trace_id: string
  readonly data: unknown
}

/** The stream's unauthorized close code (a refused, revoked or expired credential). */
const UNAUTHORIZED = 4401

/**
 * Follows the account's live span stream (`/ws/v1/stream`) for as long as the returned function is not called:
 * the key goes in a first `auth` message (never in the URL, which servers log), events come in batch frames, and a
 * dropped connection is resumed from the last event id seen.
 */
export const followLive = (options: {
  readonly key: string
  readonly filters: LiveFilters
  readonly onEvents: (events: ReadonlyArray<LiveEvent>) => void
  readonly onState?: (state: LiveState) => void
  readonly onUnauthorized?: () => void
}): (() => void) => {
  let socket: WebSocket | undefined
  let lastEventId: number | undefined
  let stopped = false
  let retry: ReturnType<typeof setTimeout> | undefined
  let attempts = 0

  const deliver = (wire: ReadonlyArray<WireEvent>) => {
    const events: Array<LiveEvent> = []
    for (const event of wire) {
      if (typeof event.id === "number") lastEventId = Math.max(lastEventId ?? 0, event.id)
      if (event.type === "span") {
        if (isSpanWire(event.data))
          events.push({ type: "span", event: event.event, traceId: event.trace_id, span: event.data })
      } else if (event.type === "trace") {
        const trace = decodeTrace(event.data)
        events.push({ type: "trace", event: event.event, traceId: event.trace_id, trace: Either.getOrUndefined(trace) })
      }
    }
    if (events.length > 0) options.onEvents(events)
  }

  const connect = () => {
    if (stopped) return
    options.onState?.(attempts === 0 ? "connecting" : "reconnecting")
    const url = new URL("/ws/v1/stream", window.location.href)
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:"
    const ws = new WebSocket(url)
    socket = ws
    ws.onopen = () => ws.send(JSON.stringify({ type: "auth", token: options.key }))
    ws.onmessage = (message) => {
      let frame: { type?: string; events?: Array<WireEvent> } & Partial<WireEvent>
      try {
        frame = JSON.parse(String(message.data))
      } catch {
        return
      }
      if (frame.type === "authenticated") {
        ws.send(
          JSON.stringify({
            type: "subscribe",
            filters: options.filters,
            batch: true,
            ...(lastEventId === undefined ? {} : { last_event_id: lastEventId })
          })
        )
      } else if (frame.type === "subscribed") {
        attempts = 0
        options.onState?.("live")
      } else if (frame.type === "batch" && Array.isArray(frame.events)) {
        deliver(frame.events)
      } else if (frame.type === "span" || frame.type === "trace") {
        deliver([frame as WireEvent])
      } else if (frame.type === "ping") {
        ws.send(JSON.stringify({ type: "pong" }))
      }
    }
    ws.onclose = (close) => {
      if (stopped || socket !== ws) return
      if (close.code === UNAUTHORIZED) {
        options.onState?.("closed")
        options.onUnauthorized?.()
        return
      }
      attempts++
      options.onState?.("reconnecting")
      retry = setTimeout(connect, Math.min(10_000, 250 * 2 ** Math.min(attempts, 6)))
    }
  }

  connect()
  return () => {
    stopped = true
    if (retry !== undefined) clearTimeout(retry)
    socket?.close(1000, "page left")
    options.onState?.("closed")
  }
}
