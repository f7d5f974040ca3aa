import { FILTER_KEYS } from "../pages/traces/filterKeys.ts"

/** The first page of the traces list as the page asks for it: 50, newest first, a capped total, the URL's filters. */
export const LIST_PAGE = 50

/** Where the signed-in key is kept (the shell's session). */
export const KEY_STORAGE = "tapedeck.studio.key"

/**
 * The API request the page at `pathname`/`search` starts with, when it is one the prefetch may start early: a
 * trace's detail, or the list's first page (its filters in the list's canonical order).
 */
export const firstRequestUrl = (pathname: string, search: URLSearchParams): string | undefined => {
  const trace = /^\/ui\/traces\/([^/]+)$/.exec(pathname)
  if (trace !== null) return `/api/v1/traces/${trace[1]}`
  if (pathname !== "/ui" && pathname !== "/ui/traces") return undefined
  const params = new URLSearchParams({ limit: String(LIST_PAGE), total: "capped" })
  for (const key of FILTER_KEYS) {
    const value = search.get(key)?.trim()
    if (value !== undefined && value !== "") params.set(key, value)
  }
  return `/api/v1/traces?${params.toString()}`
}

interface Prefetched {
  readonly url: string
  readonly key: string
  readonly response: Promise<Response>
}

const holder = globalThis as { __tapedeckPrefetch?: Prefetched | undefined }

/** Started by the small script that runs before the bundle: the page's first request, sent while the bundle loads. */
export const startPrefetch = () => {
  try {
    const key = sessionStorage.getItem(KEY_STORAGE)
    const url =
      key === null ? undefined : firstRequestUrl(window.location.pathname, new URLSearchParams(window.location.search))
    if (key === null || url === undefined) return
    const response = fetch(url, { headers: { authorization: `Bearer ${key}`, accept: "application/json" } })
    response.catch(() => undefined)
    holder.__tapedeckPrefetch = { url, key, response }
  } catch {
    // No storage, no prefetch: the page asks for itself.
  }
}

/** The prefetched response for `url` under `key`, once (later asks go to the API). */
export const takePrefetched = (url: string, key: string): Promise<Response> | undefined => {
  const prefetched = holder.__tapedeckPrefetch
  holder.__tapedeckPrefetch = undefined
  return prefetched !== undefined && prefetched.url === url && prefetched.key === key ? prefetched.response : undefined
}
