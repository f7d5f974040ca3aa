import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Traces } from "#layers/traces/Traces"
import type { TraceNotFound } from "#src/domain/Trace"
import { Conflict, NotFound, Unauthorized, ValidationFailed } from "../api/ApiErrors.ts"
import { TapedeckApi } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"

const notFound = (e: TraceNotFound) => new NotFound({ message: `trace ${e.traceId} not found` })
const rejected = (e: { readonly reason: string }) => new ValidationFailed({ message: e.reason })
const withJob = (jobId: Option.Option<string>) => Option.match(jobId, { onNone: () => ({}), onSome: (id) => ({ jobId: id }) })

// Reads answer with JSON built straight from the rows (the same shapes the contract declares, which the
// contract tests decode with those schemas): encoding 1000 spans through Schema again costs more than the
// query itself.
export const TracesHttpLive = HttpApiBuilder.group(TapedeckApi, "traces", (handlers) =>
  Effect.gen(function*() {
    const traces = yield* Traces
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.unsafeJson(yield* traces.list(accountId, urlParams))
        }).pipe(Effect.catchTags({ InvalidCursor: () => new ValidationFailed({ message: "cursor: not a cursor this service issued" }) })))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId, liveKey } = yield* CurrentPrincipal
          const { jobId, status } = yield* traces.create(accountId, payload, liveKey ?? null)
          return { id: payload.id, status, ...withJob(jobId) }
        }).pipe(Effect.catchTags({
          CredentialRevoked: () => new Unauthorized({ message: "invalid or revoked API key" }),
          TraceIdTaken: (e) => new Conflict({ message: `trace ${e.traceId} already exists` }),
          SpansRejected: rejected
        })))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.raw(yield* traces.getJson(accountId, path.traceId), { contentType: "application/json" })
        }).pipe(Effect.catchTags({ TraceNotFound: () => new NotFound({ message: `trace ${path.traceId} not found` }) })))
      .handle("finish", ({ path, payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const { jobId } = yield* traces.finish(accountId, path.traceId, payload)
          return { id: path.traceId, status: "updated" as const, ...withJob(jobId) }
        }).pipe(Effect.catchTags({ TraceNotFound: notFound })))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          yield* traces.remove(accountId, path.traceId)
          return { deleted: true as const }
        }).pipe(Effect.catchTags({ TraceNotFound: notFound })))
      .handle("appendSpans", ({ path, payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const result = yield* traces.appendSpans(accountId, path.traceId, payload.spans)
          return { id: path.traceId, spans_written: result.spansWritten, spanCount: result.spanCount }
        }).pipe(Effect.catchTags({
          TraceNotFound: notFound,
          SpansRejected: rejected,
          TraceNotRunning: (e) =>
            new Conflict({ message: `trace ${e.traceId} is ${e.status}: spans can only be added to a running trace` })
        })))
  })).pipe(Layer.provide(Traces.Default))
