import type { Effect } from "effect"
import { type DependencyList, useCallback, useEffect, useState } from "react"
import { type ApiCallError, type ApiClient, runCall } from "../api/client.ts"
import { useSession } from "./session.tsx"

export type ApiState<A> =
  | { readonly status: "loading"; readonly data?: A | undefined }
  | { readonly status: "ok"; readonly data: A }
  | { readonly status: "error"; readonly error: ApiCallError; readonly data?: A | undefined }

/** The session's call runner: a 401 from any call ends the session with a message on the sign-in form. */
export const useRunCall = () => {
  const { client, signOut } = useSession()
  return useCallback(
    async <A, E>(call: (client: ApiClient) => Effect.Effect<A, E>, signal?: AbortSignal): Promise<A> => {
      try {
        return await runCall(call(client), signal)
      } catch (e) {
        if ((e as ApiCallError).code === "unauthorized") signOut("Your key is no longer accepted. Sign in again.")
        throw e
      }
    },
    [client, signOut]
  )
}

/** Loads `call` when `deps` change (the previous request is aborted); `reload` runs it again. */
export const useApi = <A, E>(call: (client: ApiClient) => Effect.Effect<A, E>, deps: DependencyList) => {
  const run = useRunCall()
  const [state, setState] = useState<ApiState<A>>({ status: "loading" })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    const abort = new AbortController()
    setState((previous) => ({ status: "loading", data: previous.data }))
    run(call, abort.signal).then(
      (data) => abort.signal.aborted || setState({ status: "ok", data }),
      (error: ApiCallError) =>
        abort.signal.aborted || setState((previous) => ({ status: "error", error, data: previous.data }))
    )
    return () => abort.abort()
    // eslint-disable-next-line react-hooks/exhaustive-deps -- the caller names what the call depends on
  }, [...deps, tick, run])
  return { ...state, reload: () => setTick((n) => n + 1) }
}
