import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Option, Redacted, Schema } from "effect"
import { Credentials } from "#layers/auth/Credentials"
import { SdkReplay } from "#layers/replay/SdkReplay"
import type { AccountId } from "#src/domain/Ids"
import { SdkMessage } from "#src/domain/ReplayProtocol"
import { missingCredentials, ValidationFailed } from "../api/ApiErrors.ts"
import { errorResponse } from "./ErrorBodies.ts"

const decodeMessage = Schema.decodeUnknownEither(Schema.parseJson(SdkMessage))

const unauthorized = errorResponse(missingCredentials())

const upgradeRequired = errorResponse(new ValidationFailed({ message: "a WebSocket upgrade is required" }))

/** The socket's principal: `x-service-key`, `Authorization: Bearer`, or (for browsers) `?token=`. */
const authenticate = (credentials: Credentials, request: HttpServerRequest.HttpServerRequest) => {
  const key = request.headers["x-service-key"]
  if (key) return credentials.serviceKey(Redacted.make(key))
  const authorization = request.headers.authorization ?? ""
  if (/^bearer /i.test(authorization)) return credentials.bearer(Redacted.make(authorization.slice(7)))
  const token = new URL(request.url, "http://localhost").searchParams.get("token")
  return credentials.bearer(Redacted.make(token ?? ""))
}

/**
 * GET /ws/v1/replay: an SDK process registers the agents it can run and receives `replay` commands for
 * its account; it reports `replay_finished` when its result trace has been sent. Messages are JSON text
 * frames (src/domain/ReplayProtocol.ts).
 */
export const ReplaySocketLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const sdk = yield* SdkReplay
    yield* router.get(
      "/ws/v1/replay",
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const principal = yield* authenticate(credentials, request).pipe(Effect.option)
        if (Option.isNone(principal)) return unauthorized
        const accountId: AccountId = principal.value.accountId
        // A plain HTTP request (no upgrade, or a broken handshake) fails the upgrade: a 400 with the error body.
        const upgraded = yield* request.upgrade.pipe(Effect.option)
        if (Option.isNone(upgraded)) return upgradeRequired
        const socket = upgraded.value
        const write = yield* socket.writer
        const send = (message: unknown) => write(JSON.stringify(message)).pipe(Effect.ignore)
        const connectionId = crypto.randomUUID()
        yield* sdk.open(accountId, connectionId, (text) => write(text).pipe(Effect.ignore))
        yield* socket.runRaw((frame) => {
          const text = typeof frame === "string" ? frame : new TextDecoder().decode(frame)
          const message = decodeMessage(text)
          if (Either.isLeft(message)) return send({ type: "error", message: "not a replay protocol message" })
          const m = message.right
          switch (m.type) {
            case "ping":
              return send({ type: "pong" })
            case "register":
              return sdk.register(connectionId, m.agents).pipe(
                Effect.zipRight(send({ type: "registered", connection_id: connectionId, agents: m.agents }))
              )
            case "resume":
              return sdk.resume(accountId, connectionId, m.execution_ids)
            case "replay_finished":
              return sdk.finish(accountId, {
                executionId: m.execution_id,
                status: m.status,
                error: m.error ?? null,
                byteReplayed: m.byte_replayed ?? 0,
                faithfulReexec: m.faithful_reexec ?? 0,
                caveats: m.fidelity_caveats ?? []
              }, connectionId).pipe(Effect.zipRight(send({ type: "finished_ack", execution_id: m.execution_id })))
          }
        }).pipe(
          Effect.catchAllCause(() => Effect.void),
          Effect.ensuring(sdk.close(connectionId))
        )
        return HttpServerResponse.empty()
      }).pipe(Effect.scoped)
    )
  })
)
