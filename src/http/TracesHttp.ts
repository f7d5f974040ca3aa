import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Traces } from "#layers/traces/Traces"
import { TapedeckApi } from "../api/Api.ts"
import { answerDomainErrors } from "../api/ErrorTable.ts"
import { CurrentPrincipal } from "../api/Security.ts"

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
        }).pipe(answerDomainErrors))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { accountId, liveKey } = yield* CurrentPrincipal
          const { jobId, status } = yield* traces.create(accountId, payload, liveKey ?? null)
          return { id: payload.id, status, ...withJob(jobId) }
        }).pipe(answerDomainErrors))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          return HttpServerResponse.raw(yield* traces.getJson(accountId, path.traceId), { contentType: "application/json" })
        }).pipe(answerDomainErrors))
      .handle("finish", ({ path, payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const { jobId } = yield* traces.finish(accountId, path.traceId, payload)
          return { id: path.traceId, status: "updated" as const, ...withJob(jobId) }
        }).pipe(answerDomainErrors))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          yield* traces.remove(accountId, path.traceId)
          return { deleted: true as const }
        }).pipe(answerDomainErrors))
      .handle("appendSpans", ({ path, payload }) =>
        Effect.gen(function*() {
          const { accountId } = yield* CurrentPrincipal
          const result = yield* traces.appendSpans(accountId, path.traceId, payload.spans)
          return { id: path.traceId, spans_written: result.spansWritten, spanCount: result.spanCount }
        }).pipe(answerDomainErrors))
  })).pipe(Layer.provide(Traces.Default))
