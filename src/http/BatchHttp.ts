import { HttpApiBuilder, type HttpRouter, HttpServerResponse } from "@effect/platform"
import { Deferred, Effect, Layer, Option } from "effect"
import { BatchRepo } from "#layers/batch/BatchRepo"
import { type BatchOperation, batchTarget } from "#src/domain/Batch"
import { TapedeckApi } from "../api/Api.ts"
import { type ApiError, errorBody, internalError, statusOf, Unauthorized, ValidationFailed } from "../api/ApiErrors.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { InsideBatch, runOperation, SelfApp, SelfAppLive } from "./BatchRunner.ts"

const CREDENTIAL_HEADERS = ["x-service-key", "authorization"] as const

/** The route path an operation reaches, as the router sees it (percent-decoded, no trailing slash). */
const routeOf = (op: BatchOperation) => decodeURI((batchTarget(op.path) ?? "").split("?")[0]!).replace(/\/+$/, "")
const NO_STORE = { "cache-control": "no-store" }

export const BatchHttpLive = HttpApiBuilder.group(TapedeckApi, "batch", (handlers) =>
  Effect.gen(function*() {
    const holder = yield* SelfApp
    const batches = yield* BatchRepo
    const services = yield* Effect.context<HttpRouter.HttpRouter.DefaultServices>()
    return handlers.handle("run", ({ payload, request }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        if (Option.isSome(yield* Effect.serviceOption(InsideBatch))) {
          return yield* new ValidationFailed({ message: "a batch cannot run a batch" })
        }
        if (payload.async) {
          // Results of a background batch are stored: a new API key must never be among them.
          const createsKey = payload.operations.findIndex((op) =>
            op.method === "POST" && routeOf(op) === "/api/v1/api-keys"
          )
          if (createsKey >= 0) {
            return yield* new ValidationFailed({
              message: `operations.${createsKey}: an async batch cannot create API keys (the key would be stored with the job's results)`
            })
          }
          const jobId = yield* batches.enqueue(principal.accountId, {
            accountId: principal.accountId,
            credentialId: principal.credentialId,
            operations: payload.operations
          })
          return HttpServerResponse.unsafeJson(
            { job_id: jobId, status: "queued", total: payload.operations.length },
            { status: 202, headers: NO_STORE }
          )
        }
        // In order, one at a time: an operation may depend on the ones before it.
        const app = yield* Deferred.await(holder)
        const headers: Record<string, string> = {}
        for (const name of CREDENTIAL_HEADERS) {
          const value = request.headers[name]
          if (value !== undefined) headers[name] = value
        }
        const results = yield* Effect.forEach(payload.operations, (op) =>
          runOperation(app, services, op, headers, Option.none()).pipe(
            Effect.map(({ text: _text, ...result }) => result)
          ))
        // Results may hold secrets an operation returned (a new API key): never cached.
        return HttpServerResponse.unsafeJson({ results }, { headers: NO_STORE })
      }))
  })).pipe(Layer.provide([SelfAppLive, BatchRepo.Default]))
