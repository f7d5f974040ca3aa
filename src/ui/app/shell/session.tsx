import { createContext, useContext } from "react"
import type { ApiClient } from "../api/client.ts"
import { KEY_STORAGE } from "../api/prefetch.ts"

// The key is kept in the tab's sessionStorage: gone with the tab, never sent anywhere but this origin's API.

export const storedKey = (): string | undefined => sessionStorage.getItem(KEY_STORAGE) ?? undefined
export const storeKey = (key: string) => sessionStorage.setItem(KEY_STORAGE, key)
export const forgetKey = () => sessionStorage.removeItem(KEY_STORAGE)

/** What every page gets from the shell: the signed-in client, and the ways to leave. */
export interface StudioSession {
  readonly key: string
  readonly client: ApiClient
  /** Back to the sign-in form, with `message` shown there (a 401 from any call ends here). */
  readonly signOut: (message?: string) => void
}

export const SessionContext = createContext<StudioSession | undefined>(undefined)

/** The current session; pages are only rendered signed in. */
export const useSession = (): StudioSession => {
  const session = useContext(SessionContext)
  if (session === undefined) throw new Error("useSession outside a signed-in Studio")
  return session
}
