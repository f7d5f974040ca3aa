import type { ComponentType } from "react"
import { NotFoundPage } from "./pages/not-found/NotFoundPage.tsx"
import { SearchPage } from "./pages/search/SearchPage.tsx"
import { TracePage } from "./pages/trace/TracePage.tsx"
import { TracesPage } from "./pages/traces/TracesPage.tsx"

/** What the shell hands a page: its path parameters and the query string. */
export interface PageProps {
  readonly params: Readonly<Record<string, string>>
  readonly search: URLSearchParams
}

/** A page of the Studio: where it lives and, when it is a section, its place in the navigation. */
export interface StudioRoute {
  readonly path: string
  readonly page: ComponentType<PageProps>
  readonly nav?: { readonly label: string; readonly href: string }
}

/**
 * Every page, in one table: to add one, make a folder under pages/ with its component and add a line here
 * (with `nav` when it is a top-level section). The first match wins.
 */
export const routes: ReadonlyArray<StudioRoute> = [
  { path: "/ui", page: TracesPage },
  { path: "/ui/traces", page: TracesPage, nav: { label: "Traces", href: "/ui/traces" } },
  { path: "/ui/traces/:traceId", page: TracePage },
  { path: "/ui/search", page: SearchPage, nav: { label: "Search", href: "/ui/search" } }
]

export const fallbackRoute: StudioRoute = { path: "*", page: NotFoundPage }
