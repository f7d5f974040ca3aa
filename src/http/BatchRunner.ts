import { HttpApiBuilder, HttpApp, type HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Deferred, Effect, Layer, Option } from "effect"
import type { Principal } from "#layers/auth/Credentials"
import { InternalIdentity } from "#layers/auth/InternalIdentity"
import { BatchRepo } from "#layers/batch/BatchRepo"
import type { JobHandler } from "#layers/jobs/JobHandlers"
import { ApiKeyRepo } from "#layers/storage/ApiKeyRepo"
import { type BatchOperation, type BatchOperationResult, batchTarget } from "#src/domain/Batch"
import type { AccountId } from "#src/domain/Ids"
import { JobFailed } from "#src/domain/Errors"
import { type ApiError, errorBody, internalError, statusOf, Unauthorized, ValidationFailed } from "../api/ApiErrors.ts"

// Batch operations run through the API's own app: in the request (src/http/BatchHttp.ts) or as the batch.run job.

type App = HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices>
type Services = Context.Context<HttpRouter.HttpRouter.DefaultServices>

/**
 * The API's own HttpApp (router, endpoint and API middleware: validation, authentication, rate limits, error
 * bodies), for running batch operations in process. It can only exist once every group is built, batch
 * included, so it is handed over through a Deferred filled by SelfAppInstallLive.
 */
export class SelfApp extends Context.Tag("tapedeck/SelfApp")<SelfApp, Deferred.Deferred<App>>() {}

export const SelfAppLive = Layer.effect(SelfApp, Deferred.make<App>())

/** Builds the app from the same router and middleware the server uses (layers are shared within one build). */
export const SelfAppInstallLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const holder = yield* SelfApp
    yield* Deferred.succeed(holder, yield* HttpApiBuilder.httpApp)
  })
).pipe(Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, SelfAppLive]))

/** Set while an operation runs: a batch reached from inside a batch (however its path was spelled) is refused. */
export class InsideBatch extends Context.Tag("tapedeck/InsideBatch")<InsideBatch, true>() {}

/** Bodies kept per operation of a background batch (results live in the job row). */
const MAX_KEPT_BODY_CHARS = 1_000_000

/** An operation's result that did not come from the app: an API error with its status and body. */
const refused = (e: ApiError): BatchOperationResult => ({ status: statusOf(e), body: errorBody(e) })

const parseBody = (text: string, contentType: string | undefined): unknown => {
  if (text === "") return null
  if ((contentType ?? "").includes("json")) {
    try {
      return JSON.parse(text)
    } catch {
      return text
    }
  }
  return text
}

/**
 * Runs one operation through the app as a fresh request: the caller's credential headers, or (background
 * batches) an in-process identity. Every route's validation, authentication and rate limit applies.
 */
export const runOperation = (
  app: App,
  services: Services,
  op: BatchOperation,
  headers: Readonly<Record<string, string>>,
  identity: Option.Option<Principal>
): Effect.Effect<BatchOperationResult & { readonly text: string }> =>
  Effect.gen(function*() {
    const target = batchTarget(op.path)
    if (target === undefined) {
      return { ...refused(new ValidationFailed({ message: "path: not an /api/v1/ route" })), text: "" }
    }
    const requestHeaders = new Headers(headers)
    let body: string | undefined
    if (op.body !== undefined) {
      body = JSON.stringify(op.body)
      requestHeaders.set("content-type", "application/json")
      requestHeaders.set("content-length", String(new TextEncoder().encode(body).byteLength))
    }
    const request = HttpServerRequest.fromWeb(
      new Request(`http://batch.internal${target}`, {
        method: op.method,
        headers: requestHeaders,
        ...(body === undefined ? {} : { body })
      })
    )
    const run = app.pipe(
      Effect.provideService(HttpServerRequest.HttpServerRequest, request),
      Effect.provideService(InsideBatch, true),
      Effect.provide(services),
      Effect.scoped,
      // Response hooks an operation sets (Retry-After) belong to its own answer, not to the batch's.
      Effect.locally(HttpApp.currentPreResponseHandlers, Option.none())
    )
    const response = yield* Option.match(identity, {
      onNone: () => run,
      onSome: (principal) => Effect.provideService(run, InternalIdentity, principal)
    })
    const text = yield* Effect.promise(() => HttpServerResponse.toWeb(response).text())
    return { status: response.status, body: parseBody(text, response.headers["content-type"]), text }
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.logError("batch operation failed", cause).pipe(
        Effect.as({ ...refused(internalError()), text: "" })
      )
    )
  )

const revokedResult = refused(new Unauthorized({ message: "the API key that submitted this batch has been revoked" }))

/**
 * The `batch.run` job: runs the remaining operations as the account that submitted them (an in-process
 * identity; the job stores the credential's id, never the credential), recording each result before the
 * next runs. An operation after the submitting API key was revoked is answered 401 instead of run.
 */
export const batchJobHandler = Effect.gen(function*() {
  const holder = yield* SelfApp
  const batches = yield* BatchRepo
  const keys = yield* ApiKeyRepo
  const services = yield* Effect.context<HttpRouter.HttpRouter.DefaultServices>()
  const handler: JobHandler<"batch.run"> = (job) =>
    Effect.gen(function*() {
      const payload = job.payload
      const identity: Principal = { accountId: payload.accountId as AccountId, credentialId: payload.credentialId }
      const app = yield* Deferred.await(holder)
      const start = yield* batches.progress(job.id)
      for (let index = start; index < payload.operations.length; index++) {
        const keyId = identity.credentialId.startsWith("key:") ? identity.credentialId.slice(4) : undefined
        const live = keyId === undefined ? true : yield* keys.isLive(keyId)
        let result: BatchOperationResult = revokedResult
        if (live) {
          const { text, ...ran } = yield* runOperation(app, services, payload.operations[index]!, {}, Option.some(identity))
          result = text.length > MAX_KEPT_BODY_CHARS ? { status: ran.status, body: null, truncated: true } : ran
        }
        if (!(yield* batches.record(job.id, job.attempts, index, result))) {
          return yield* new JobFailed({ reason: "the attempt lost its lease" })
        }
      }
    })
  return handler
})

/** What the job handler needs: provide it where JobHandlers are built. */
export const BatchJobDependencies = Layer.mergeAll(SelfAppLive, BatchRepo.Default, ApiKeyRepo.Default)
