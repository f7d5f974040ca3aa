import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Cause, Effect, Exit, Option } from "effect"
import { TapedeckApi } from "../../../api/Api.ts"

/**
 * Builds the typed API client for `key` (an `svc_` API key or a JWT, sent as a bearer credential) on this origin.
 * It is derived from the server's own HttpApi contract: every path, parameter, body and response type comes from
 * src/api, so the Studio cannot drift from the server.
 */
export const makeApiClient = (key: string, baseUrl: string = window.location.origin) =>
  Effect.runSync(
    HttpApiClient.make(TapedeckApi, {
      baseUrl,
      transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(key))
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

/** The client, as the contract produces it: `client.traces.list({ urlParams })`, `client.traces.get({ path })`… */
export type ApiClient = ReturnType<typeof makeApiClient>

/** A failed call, reduced to what a page shows: the API's `{error, code}` when it answered one, else the cause. */
export class ApiCallError extends Error {
  constructor(readonly code: string, message: string, readonly status?: number) {
    super(message)
  }
}

const errorCodes: Record<string, string> = {
  ValidationFailed: "validation_failed",
  Unauthorized: "unauthorized",
  NotFound: "not_found",
  Conflict: "conflict",
  RateLimited: "rate_limited",
  Unavailable: "unavailable",
  IngestBackpressure: "ingest_backpressure",
  Internal: "internal"
}

/** Turns a call's failure into an ApiCallError (a contract error keeps its code; a transport failure is `network`). */
export const toApiCallError = (cause: Cause.Cause<unknown>): ApiCallError => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value as { _tag?: string; message?: string; response?: { status?: number } }
    const code = errorCodes[error._tag ?? ""]
    if (code !== undefined) return new ApiCallError(code, error.message ?? code)
    if (error._tag === "ResponseError") {
      const status = error.response?.status
      return new ApiCallError(status === 401 ? "unauthorized" : "http", error.message ?? `HTTP ${status}`, status)
    }
    return new ApiCallError("network", error.message ?? String(error))
  }
  return new ApiCallError("internal", Cause.pretty(cause))
}

/** Runs one API call to a Promise; it rejects with an ApiCallError. */
export const runCall = async <A, E>(effect: Effect.Effect<A, E>, signal?: AbortSignal): Promise<A> => {
  const exit = await Effect.runPromiseExit(effect, signal === undefined ? undefined : { signal })
  if (Exit.isSuccess(exit)) return exit.value
  throw toApiCallError(exit.cause)
}
