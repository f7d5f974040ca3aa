import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Cause, Effect, Exit, Option } from "effect"
import { TapedeckApi } from "../../../api/Api.ts"

const withKey = (key: string) =>
  Effect.runSync(
    Effect.map(HttpClient.HttpClient, HttpClient.mapRequest(HttpClientRequest.bearerToken(key))).pipe(
      Effect.provide(FetchHttpClient.layer)
    )
  )

/** The whole client at once: its type is the client's type (the Studio builds groups lazily, below). */
const wholeClient = (key: string, baseUrl: string) =>
  Effect.runSync(
    HttpApiClient.make(TapedeckApi, { baseUrl, transformClient: () => withKey(key) }).pipe(
      Effect.provide(FetchHttpClient.layer)
    )
  )

/** The client, as the contract produces it: `client.traces.list({ urlParams })`, `client.search.search({ payload })`… */
export type ApiClient = ReturnType<typeof wholeClient>

/**
 * Builds the typed API client for `key` (an `svc_` API key or a JWT, sent as a bearer credential) on this origin.
 * It is derived from the server's own HttpApi contract: every path, parameter, body and response type comes from
 * src/api, so the Studio cannot drift from the server. Each group's client is built on first use (building all of
 * them costs the first page a noticeable delay, and a page uses one or two).
 */
export const makeApiClient = (key: string, baseUrl: string = window.location.origin): ApiClient => {
  const httpClient = withKey(key)
  const groups = new Map<string, unknown>()
  return new Proxy({} as ApiClient, {
    get: (_, name) => {
      if (typeof name !== "string" || !(name in TapedeckApi.groups)) return undefined
      let group = groups.get(name)
      if (group === undefined) {
        group = Effect.runSync(
          HttpApiClient.group(TapedeckApi, { group: name as keyof ApiClient, httpClient, baseUrl })
        )
        groups.set(name, group)
      }
      return group
    }
  })
}

/** A failed call, reduced to what a page shows: the API's `{error, code}` when it answered one, else the cause. */
export class ApiCallError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status?: number
  ) {
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
