import { useEffect, useRef, useState } from "react"
import { followLive, type LiveEvent, type LiveFilters, type LiveState } from "../api/stream.ts"
import { useSession } from "./session.tsx"

/**
 * Follows the live stream while the page is mounted (and `enabled`), handing each batch of events to `onEvents`
 * (the latest callback is used, so it may close over fresh state). Returns the connection's state for display.
 */
export const useLive = (
  filters: LiveFilters,
  onEvents: (events: ReadonlyArray<LiveEvent>) => void,
  enabled = true
): LiveState => {
  const { key, signOut } = useSession()
  const [state, setState] = useState<LiveState>("connecting")
  const handler = useRef(onEvents)
  handler.current = onEvents
  const filterKey = JSON.stringify(filters)
  useEffect(() => {
    if (!enabled) return setState("closed")
    return followLive({
      key,
      filters: JSON.parse(filterKey) as LiveFilters,
      onEvents: (events) => handler.current(events),
      onState: setState,
      onUnauthorized: () => signOut("Your key is no longer accepted. Sign in again.")
    })
  }, [key, filterKey, enabled, signOut])
  return state
}
