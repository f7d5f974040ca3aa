import { type ComponentType, lazy } from "react"
import { NotFoundPage } from "./pages/not-found/NotFoundPage.tsx"
import { SearchPage } from "./pages/search/SearchPage.tsx"
import { TracePage } from "./pages/trace/TracePage.tsx"
import { TracesPage } from "./pages/traces/TracesPage.tsx"

/** What the shell hands a page: its path parameters and the query string. */
export interface PageProps {
  readonly params: Readonly<Record<string, string>>
  readonly search: URLSearchParams
}

/**
 * Pages loaded when first visited (their own chunk of the bundle): the traces list, a trace and search come with the
 * first load, the others (and the libraries only they use: text diff, graph layout) when opened.
 */
const later = <K extends string>(load: () => Promise<Record<K, ComponentType<PageProps>>>, name: K) =>
  lazy(() => load().then((module) => ({ default: module[name] })))
const ComparePage = later(() => import("./pages/compare/ComparePage.tsx"), "ComparePage")
const EnforcementPage = later(() => import("./pages/enforcement/EnforcementPage.tsx"), "EnforcementPage")
const EvaluationPage = later(() => import("./pages/evaluations/EvaluationPage.tsx"), "EvaluationPage")
const EvaluationsPage = later(() => import("./pages/evaluations/EvaluationsPage.tsx"), "EvaluationsPage")
const ForkPage = later(() => import("./pages/fork/ForkPage.tsx"), "ForkPage")
const ForksPage = later(() => import("./pages/fork/ForksPage.tsx"), "ForksPage")
const SessionPage = later(() => import("./pages/sessions/SessionPage.tsx"), "SessionPage")
const SessionsPage = later(() => import("./pages/sessions/SessionsPage.tsx"), "SessionsPage")
const SettingsPage = later(() => import("./pages/settings/SettingsPage.tsx"), "SettingsPage")
const UsagePage = later(() => import("./pages/usage/UsagePage.tsx"), "UsagePage")

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
