import { type AnchorHTMLAttributes, type MouseEvent, useSyncExternalStore } from "react"

/** Path patterns like `/ui/traces/:traceId`: literal segments and named parameters. */
export const matchPath = (pattern: string, pathname: string): Record<string, string> | undefined => {
  const want = pattern.split("/").filter(Boolean)
  const have = pathname.split("/").filter(Boolean)
  if (want.length !== have.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < want.length; i++) {
    const segment = want[i]!
    const actual = have[i]!
    if (segment.startsWith(":")) {
      try {
        params[segment.slice(1)] = decodeURIComponent(actual)
      } catch {
        return undefined
      }
    } else if (segment !== actual) return undefined
  }
  return params
}

const listeners = new Set<() => void>()
const notify = () => listeners.forEach((listener) => listener())
window.addEventListener("popstate", notify)

const subscribe = (listener: () => void) => {
  listeners.add(listener)
  return () => listeners.delete(listener)
}
const snapshot = () => window.location.pathname + window.location.search

/** The current path and query; re-renders on navigation. */
export const useLocation = () => {
  const href = useSyncExternalStore(subscribe, snapshot)
  const url = new URL(href, window.location.origin)
  return { pathname: url.pathname, search: url.searchParams, href }
}

/** Goes to `href` inside the Studio (history entry; `replace` for refinements such as a filter or a selection). */
export const navigate = (href: string, options: { readonly replace?: boolean } = {}) => {
  if (href === snapshot()) return
  if (options.replace) window.history.replaceState(null, "", href)
  else window.history.pushState(null, "", href)
  notify()
}

/** An in-app link: a real anchor (open in a new tab works), navigated without a reload on a plain click. */
export const Link = (
  props: AnchorHTMLAttributes<HTMLAnchorElement> & { readonly href: string; readonly replace?: boolean }
) => {
  const { replace, onClick, ...rest } = props
  const click = (event: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(event)
    if (
      event.defaultPrevented ||
      event.button !== 0 ||
      event.metaKey ||
      event.ctrlKey ||
      event.shiftKey ||
      event.altKey
    )
      return
    event.preventDefault()
    navigate(props.href, replace ? { replace } : {})
  }
  return <a {...rest} onClick={click} />
}
