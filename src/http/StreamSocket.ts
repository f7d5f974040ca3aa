import { HttpApiBuilder, HttpServerRequest, HttpServerResponse, Socket } from "@effect/platform"
import { Cause, Deferred, Duration, Effect, Either, Exit, Fiber, Option, Queue, Redacted, Schedule, Schema } from "effect"
import { Credentials, type Principal } from "#layers/auth/Credentials"
import { AppConfig } from "#layers/config/AppConfig"
import { StreamHub, type Subscriber } from "#layers/stream/StreamHub"
import type { AccountId } from "#src/domain/Ids"
import { EventIdParam, StreamClientMessage, StreamCloseCode } from "#src/domain/StreamEvent"
import { DecimalDigits } from "#src/domain/Page"
import { type ApiError, errorBody, missingCredentials, ValidationFailed } from "../api/ApiErrors.ts"
import { errorResponse } from "./ErrorBodies.ts"
import { headerCredential } from "./HeaderCredentials.ts"
import type { InvalidCredential } from "#src/domain/Errors"

const decodeMessage = Schema.decodeUnknownEither(Schema.parseJson(StreamClientMessage))
const decodeEventId = Schema.decodeUnknownOption(Schema.compose(Schema.compose(DecimalDigits, Schema.NumberFromString), EventIdParam))

/** Past this many bytes buffered in the socket, the writer waits for the client to read. */
const HIGH_WATER_BYTES = 1024 * 1024

const unauthorized = errorResponse(missingCredentials())
const badRequest = (message: string) => errorResponse(new ValidationFailed({ message }))

/** An API error as a message on an open stream: the error body's code with its message. */
const errorMessage = (e: ApiError) => ({ type: "error", code: errorBody(e).code, message: e.message })

/** The part of Bun's ServerWebSocket this route uses. */
interface RawSocket {
  sendText(data: string): number
  /** Runs `callback` with the socket's writes batched into one system call. */
  cork?<T>(callback: (ws: RawSocket) => T): T
  close(code?: number, reason?: string): void
  getBufferedAmount(): number
  readonly readyState: number
}

interface RawConnection {
  readonly ws: RawSocket
  readonly inbox: Queue.Queue<string | Uint8Array>
  readonly closed: Deferred.Deferred<void>
}

/**
 * Events, already serialised, as one frame for a batching subscriber. The hub hands every member of an audience the
 * same array, so the frame is built once per audience, not once per subscriber.
 */
const builtFrames = new WeakMap<ReadonlyArray<{ readonly json: string }>, string>()
const batchFrame = (events: ReadonlyArray<{ readonly json: string }>) => {
  const known = builtFrames.get(events)
  if (known !== undefined) return known
  let frame = `{"type":"batch","count":${events.length},"events":[`
  for (let i = 0; i < events.length; i++) frame += i === 0 ? events[i]!.json : `,${events[i]!.json}`
  frame += "]}"
  builtFrames.set(events, frame)
  return frame
}

/** Replayed events per frame for a batching subscriber. */
const REPLAY_BATCH = 500

/** Client messages received but not yet handled, per connection. */
const MAX_PENDING_CLIENT_MESSAGES = 64

/**
 * Upgrades to a WebSocket and returns Bun's socket itself. Effect's `Socket` hides how much is buffered
 * for a client, so a slow consumer could only be buffered without bound; this speaks the same handshake
 * with Bun's server that `@effect/platform-bun` uses (its `open`, `message` and `close` handlers read
 * `ws.data.deferred`, `ws.data.run` and `ws.data.closeDeferred`). Undefined on another runtime.
 */
const upgradeRaw = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const bun = request as unknown as { source?: unknown; bunServer?: { upgrade: (req: unknown, options: unknown) => boolean } }
    if (!bun.bunServer || !bun.source) return Option.none<RawConnection>()
    const opened = yield* Deferred.make<RawSocket>()
    const closeDeferred = yield* Deferred.make<void, Socket.SocketError>()
    // A client sends an auth and a few subscribe messages; one that floods is closed rather than buffered.
    const inbox = yield* Queue.dropping<string | Uint8Array>(MAX_PENDING_CLIENT_MESSAGES)
    let socket: RawSocket | undefined
    const ok = bun.bunServer.upgrade(bun.source, {
      data: {
        deferred: opened,
        closeDeferred,
        buffer: [],
        run: (message: string | Uint8Array) => {
          if (!Queue.unsafeOffer(inbox, message)) socket?.close(1008, "too many messages")
        }
      }
    })
    if (!ok) return Option.none<RawConnection>()
    const ws = yield* Deferred.await(opened)
    socket = ws
    const closed = yield* Deferred.make<void>()
    yield* Deferred.await(closeDeferred).pipe(
      Effect.exit,
      Effect.zipRight(Deferred.succeed(closed, undefined)),
      Effect.forkDaemon
    )
    return Option.some<RawConnection>({ ws, inbox, closed })
  })

/** A connection's principal, and the lookup that produced it (run again to see the credential is still good). */
interface Authenticated {
  readonly principal: Principal
  readonly check: Effect.Effect<Principal, InvalidCredential>
}

const authenticate = (check: Effect.Effect<Principal, InvalidCredential>) =>
  check.pipe(Effect.map((principal): Authenticated => ({ principal, check })), Effect.option)

/**
 * GET /ws/v1/stream: the live span stream. Authenticated by header, by `?token=`, or by a first
 * `{"type":"auth","token"}` message; a client subscribes with filters and receives its account's span and
 * trace events as JSON text frames (docs/stream.md).
 */
export const StreamSocketLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const hub = yield* StreamHub
    const config = yield* AppConfig

    const connection = (
      raw: RawConnection,
      preset: Option.Option<Authenticated>,
      presetToken: Option.Option<string>,
      queryLastEventId: number | undefined
    ) =>
      Effect.gen(function*() {
        const { ws, inbox, closed } = raw
        const sendNow = (message: unknown) => Effect.sync(() => void ws.sendText(JSON.stringify(message)))
        const close = (code: number, reason: string) => Effect.sync(() => ws.close(code, reason))

        // Authentication: the header's principal, else ?token=, else the first message (within the timeout).
        let authenticated = preset
        if (Option.isNone(authenticated)) {
          const token = Option.isSome(presetToken)
            ? Option.some(presetToken.value)
            : yield* Queue.take(inbox).pipe(
              Effect.map((frame) => {
                const message = decodeMessage(typeof frame === "string" ? frame : new TextDecoder().decode(frame))
                return Either.isRight(message) && message.right.type === "auth" ? Option.some(message.right.token) : Option.none<string>()
              }),
              Effect.timeoutTo({ duration: Duration.millis(config.streamAuthTimeoutMs), onSuccess: (t) => t, onTimeout: () => Option.none<string>() }),
              Effect.raceFirst(Deferred.await(closed).pipe(Effect.as(Option.none<string>())))
            )
          if (Option.isSome(token)) {
            authenticated = yield* authenticate(credentials.bearer(Redacted.make(token.value)))
          }
          if (Option.isNone(authenticated)) {
            yield* sendNow(errorMessage(missingCredentials()))
            return yield* close(StreamCloseCode.unauthorized, "unauthorized")
          }
        }
        const { check, principal } = authenticated.value
        const accountId: AccountId = principal.accountId

        // Events are written at once while the client keeps up; only while more than HIGH_WATER_BYTES are unread
        // do they wait in `backlog`, and more than the bound of events waiting closes the connection (4008).
        // A batching subscriber gets each push (one write batch) as one frame.
        let batched = false
        const backlog: Array<string> = []
        let backlogEvents = 0
        const backlogCounts: Array<number> = []
        const wake = yield* Queue.sliding<void>(1)
        const slow = yield* Deferred.make<void>()
        const behind = () => ws.getBufferedAmount() > HIGH_WATER_BYTES && ws.readyState === 1
        /**
         * Sends frames at once or queues them; false when over the bound. A frame holds one event, or `eventsEach`
         * (a batch frame). `messages` may be shared with other subscribers: read, never changed.
         */
        const offerFrames = (messages: ReadonlyArray<{ readonly json: string }>, eventsEach = 1) => {
          let i = 0
          if (backlog.length === 0 && !behind()) {
            const sendSome = () => {
              while (i < messages.length && !behind()) ws.sendText(messages[i++]!.json)
            }
            if (ws.cork) ws.cork(sendSome)
            else sendSome()
          }
          if (i === messages.length) return true
          const waiting = (messages.length - i) * eventsEach
          if (backlogEvents + waiting > config.streamQueueMax) return false
          const wasEmpty = backlog.length === 0
          for (; i < messages.length; i++) {
            backlog.push(messages[i]!.json)
            backlogCounts.push(eventsEach)
          }
          backlogEvents += waiting
          if (wasEmpty) Queue.unsafeOffer(wake, undefined)
          return true
        }
        const offerAll = (messages: ReadonlyArray<{ readonly json: string }>) =>
          !batched ? offerFrames(messages) : messages.length === 0 || offerFrames([{ json: batchFrame(messages) }], messages.length)
        const offer = (text: string) => offerFrames([{ json: text }])
        const subscriber: Subscriber = {
          accountId,
          filters: undefined,
          pending: undefined,
          push: offerAll,
          overflow: () => void Deferred.unsafeDone(slow, Exit.void)
        }

        // Waits while the client has not read what was sent (the socket's buffer is over the high water).
        const drained = Effect.suspend(() => (behind() ? Effect.fail("full" as const) : Effect.void)).pipe(
          Effect.retry(Schedule.spaced("5 millis"))
        )
        const sendPaced = (text: string) => drained.pipe(Effect.zipRight(Effect.sync(() => void ws.sendText(text))))
        const enqueue = (message: unknown) =>
          Effect.sync(() => {
            if (!offer(JSON.stringify(message))) subscriber.overflow()
          })

        const writer = Queue.take(wake).pipe(
          Effect.zipRight(Effect.whileLoop({
            while: () => backlog.length > 0,
            body: () => drained.pipe(Effect.zipRight(Effect.sync(() => {
              // Send what fits under the high water in one go.
              let n = 0
              const sendSome = () => {
                while (n < backlog.length && !behind()) {
                  ws.sendText(backlog[n]!)
                  backlogEvents -= backlogCounts[n++]!
                }
              }
              if (ws.cork) ws.cork(sendSome)
              else sendSome()
              backlog.splice(0, n)
              backlogCounts.splice(0, n)
            }))),
            step: () => {}
          })),
          Effect.forever
        )
        const heartbeat = Effect.suspend(() => enqueue({ type: "ping", time: new Date().toISOString() })).pipe(
          Effect.delay(Duration.seconds(config.streamPingSeconds)),
          Effect.forever
        )

        let firstSubscribe = true
        const handle = (frame: string | Uint8Array) =>
          Effect.gen(function*() {
            const text = typeof frame === "string" ? frame : new TextDecoder().decode(frame)
            const decoded = decodeMessage(text)
            if (Either.isLeft(decoded)) {
              return yield* enqueue(errorMessage(new ValidationFailed({ message: `not a stream message: ${decoded.left.message.slice(0, 500)}` })))
            }
            const message = decoded.right
            switch (message.type) {
              case "ping":
                return yield* enqueue({ type: "pong" })
              case "pong":
              case "auth":
                return
              case "unsubscribe":
                subscriber.filters = undefined
                return yield* enqueue({ type: "unsubscribed" })
              case "subscribe": {
                const lastEventId = message.last_event_id ?? (firstSubscribe ? queryLastEventId : undefined)
                firstSubscribe = false
                batched = message.batch === true
                const replay = yield* hub.subscribe(subscriber, message.filters, lastEventId)
                if (batched) {
                  for (let i = 0; i < replay.events.length; i += REPLAY_BATCH) {
                    yield* sendPaced(batchFrame(replay.events.slice(i, i + REPLAY_BATCH)))
                  }
                } else {
                  for (const event of replay.events) yield* sendPaced(event.json)
                }
                yield* sendPaced(JSON.stringify({
                  type: "subscribed",
                  filters: message.filters,
                  ...(batched ? { batch: true } : {}),
                  ...(lastEventId === undefined ? {} : { replayed: replay.events.length, replay_complete: replay.complete })
                }))
                if (lastEventId !== undefined) yield* hub.endReplay(subscriber, replay.replayedRows)
              }
            }
          })
        const reader = Queue.take(inbox).pipe(Effect.flatMap(handle), Effect.forever)
        // The credential is checked again every heartbeat interval: a revoked key or an expired JWT ends the stream.
        // Only a refusal counts (a database outage is not a reason to drop clients).
        const revoked = yield* Deferred.make<void>()
        const recheck = check.pipe(
          Effect.exit,
          Effect.flatMap((exit) =>
            Exit.isFailure(exit) && Option.isSome(Cause.failureOption(exit.cause))
              ? Deferred.succeed(revoked, undefined)
              : Effect.void
          ),
          Effect.delay(Duration.seconds(config.streamPingSeconds)),
          Effect.forever
        )

        // Unregistered however the connection ends: when the client goes away, the request's fiber is interrupted.
        const outcome = yield* Effect.acquireUseRelease(
          hub.register(subscriber),
          () =>
            Effect.gen(function*() {
              yield* sendNow({ type: "authenticated", heartbeat_seconds: config.streamPingSeconds, queue_max: config.streamQueueMax })
              const fibers = yield* Effect.all([Effect.fork(writer), Effect.fork(heartbeat), Effect.fork(reader), Effect.fork(recheck)])
              const outcome = yield* Effect.raceAll([
                Deferred.await(closed).pipe(Effect.as("closed" as const)),
                Deferred.await(slow).pipe(Effect.as("slow" as const)),
                Deferred.await(revoked).pipe(Effect.as("revoked" as const)),
                ...fibers.map((f) => Fiber.join(f).pipe(Effect.as("failed" as const)))
              ])
              yield* Effect.forEach(fibers, Fiber.interrupt, { discard: true })
              return outcome
            }),
          () => hub.unregister(subscriber)
        )
        if (outcome === "slow") {
          yield* close(StreamCloseCode.slowConsumer, `slow consumer: more than ${config.streamQueueMax} events pending`)
        } else if (outcome === "revoked") {
          yield* close(StreamCloseCode.unauthorized, "credentials revoked or expired")
        } else if (outcome === "failed") {
          yield* close(1011, "internal error")
        }
      }).pipe(
        Effect.onInterrupt(() => Effect.sync(() => raw.ws.close(StreamCloseCode.normal, "server shutting down")))
      )

    yield* router.get(
      "/ws/v1/stream",
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const params = new URL(request.url, "http://localhost").searchParams
        // Credentials sent as headers are checked first (before validation and the upgrade): a bad one is a plain 401.
        const fromHeader = headerCredential(credentials, request)
        let preset = Option.none<Authenticated>()
        if (Option.isSome(fromHeader)) {
          preset = yield* authenticate(fromHeader.value)
          if (Option.isNone(preset)) return unauthorized
        }
        const token = Option.fromNullable(params.get("token")).pipe(Option.filter((t) => t !== ""))
        // Without an upgrade there is no first message to authenticate by: the request must carry its credentials
        // (header or ?token=), checked before anything else, as on every other route.
        if (Option.isNone(preset) && (request.headers.upgrade ?? "").toLowerCase() !== "websocket") {
          if (Option.isNone(token)) return unauthorized
          if (Option.isNone(yield* authenticate(credentials.bearer(Redacted.make(token.value))))) return unauthorized
        }
        const lastEventParam = params.get("last_event_id")
        const lastEventId = lastEventParam === null ? Option.none<number>() : decodeEventId(lastEventParam)
        if (lastEventParam !== null && Option.isNone(lastEventId)) {
          return badRequest("last_event_id must be a non-negative integer")
        }
        const raw = yield* upgradeRaw(request)
        if (Option.isNone(raw)) {
          return badRequest("a WebSocket upgrade is required")
        }
        yield* connection(raw.value, preset, token, Option.getOrUndefined(lastEventId)).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("stream connection failed", cause))
        )
        return HttpServerResponse.empty()
      })
    )
  })
)
