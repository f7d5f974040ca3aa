import { Suspense, useCallback, useMemo, useState } from "react"
import { makeApiClient } from "../api/client.ts"
import { fallbackRoute, routes } from "../routes.tsx"
import { Layout } from "./Layout.tsx"
import { matchPath, navigate, useLocation } from "./router.tsx"
import { forgetKey, SessionContext, type StudioSession, storedKey, storeKey } from "./session.tsx"
import { SignIn } from "./SignIn.tsx"

/** Picks the page for the URL. */
const Routed = () => {
  const location = useLocation()
  for (const route of routes) {
    const params = matchPath(route.path, location.pathname)
    if (params !== undefined) {
      return (
        <Suspense
          fallback={
            <p className="page muted" aria-busy="true">
              Loading…
            </p>
          }
        >
          <route.page params={params} search={location.search} />
        </Suspense>
      )
    }
  }
  return <fallbackRoute.page params={{}} search={location.search} />
}

/**
 * The Studio: the sign-in form until a key is given, then the layout and the page for the URL. Each sign-in mounts
 * a fresh tree (keyed by a session counter), so nothing one account loaded survives into another's session.
 */
export const App = () => {
  const [key, setKey] = useState(storedKey)
  const [generation, setGeneration] = useState(0)
  const [message, setMessage] = useState<string | undefined>(undefined)

  const signOut = useCallback((why?: string) => {
    forgetKey()
    setKey(undefined)
    setMessage(why)
    setGeneration((n) => n + 1)
  }, [])

  const signIn = useCallback((newKey: string) => {
    storeKey(newKey)
    setMessage(undefined)
    setGeneration((n) => n + 1)
    setKey(newKey)
    if (!window.location.pathname.startsWith("/ui")) navigate("/ui/traces", { replace: true })
  }, [])

  const session = useMemo<StudioSession | undefined>(
    () => (key === undefined ? undefined : { key, client: makeApiClient(key), signOut }),
    [key, signOut]
  )

  if (session === undefined) return <SignIn key={generation} onSignIn={signIn} message={message} />
  return (
    <SessionContext.Provider value={session} key={generation}>
      <Layout>
        <Routed />
      </Layout>
    </SessionContext.Provider>
  )
}
