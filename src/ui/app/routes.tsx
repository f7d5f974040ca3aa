import type { ComponentType } from "react"
import { ComparePage } from "./pages/compare/ComparePage.tsx"
import { EnforcementPage } from "./pages/enforcement/EnforcementPage.tsx"
import { EvaluationPage } from "./pages/evaluations/EvaluationPage.tsx"
import { EvaluationsPage } from "./pages/evaluations/EvaluationsPage.tsx"
import { ForkPage } from "./pages/fork/ForkPage.tsx"
import { ForksPage } from "./pages/fork/ForksPage.tsx"
import { NotFoundPage } from "./pages/not-found/NotFoundPage.tsx"
import { SessionPage } from "./pages/sessions/SessionPage.tsx"
import { SessionsPage } from "./pages/sessions/SessionsPage.tsx"
import { SettingsPage } from "./pages/settings/SettingsPage.tsx"
import { UsagePage } from "./pages/usage/UsagePage.tsx"
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
  { path: "/ui/search", page: SearchPage, nav: { label: "Search", href: "/ui/search" } },
  { path: "/ui/sessions", page: SessionsPage, nav: { label: "Sessions", href: "/ui/sessions" } },
  { path: "/ui/sessions/:sessionId", page: SessionPage },
  { path: "/ui/forks", page: ForksPage, nav: { label: "Forks", href: "/ui/forks" } },
  { path: "/ui/forks/:forkId", page: ForkPage },
  { path: "/ui/compare", page: ComparePage },
  { path: "/ui/evaluations", page: EvaluationsPage, nav: { label: "Evaluations", href: "/ui/evaluations" } },
  { path: "/ui/evaluations/:evaluationId", page: EvaluationPage },
  { path: "/ui/enforcement", page: EnforcementPage, nav: { label: "Enforcement", href: "/ui/enforcement" } },
  { path: "/ui/usage", page: UsagePage, nav: { label: "Usage", href: "/ui/usage" } },
  { path: "/ui/settings", page: SettingsPage, nav: { label: "Settings", href: "/ui/settings" } }
]

export const fallbackRoute: StudioRoute = { path: "*", page: NotFoundPage }
