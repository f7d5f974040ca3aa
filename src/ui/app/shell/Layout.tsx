import { type ReactNode, useState } from "react"
import { routes } from "../routes.tsx"
import { AccountName } from "./AccountName.tsx"
import { Link, navigate, useLocation } from "./router.tsx"
import { useSession } from "./session.tsx"

const TRACE_ID = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$/i

/** The frame of every signed-in page: the navigation, the search box, the account and "Sign out". */
export const Layout = (props: { readonly children: ReactNode }) => {
  const { signOut } = useSession()
  const location = useLocation()
  const [query, setQuery] = useState(location.pathname === "/ui/search" ? (location.search.get("q") ?? "") : "")
  const sections = routes.flatMap((route) => (route.nav === undefined ? [] : [route.nav]))

  return (
    <div className="app">
      <header className="topbar">
        <Link href="/ui/traces" className="brand">
          Tapedeck
        </Link>
        <nav aria-label="Sections" className="sections">
          {sections.map((section) => (
            <Link
              key={section.href}
              href={section.href}
              aria-current={location.pathname.startsWith(section.href) ? "page" : undefined}
            >
              {section.label}
            </Link>
          ))}
        </nav>
        <form
          role="search"
          className="searchbox"
          onSubmit={(e) => {
            e.preventDefault()
            const text = query.trim()
            // A trace id (ours or OpenTelemetry's) opens that trace; anything else is a span search.
            if (TRACE_ID.test(text)) navigate(`/ui/traces/${text.toLowerCase()}`)
            else if (text !== "") navigate(`/ui/search?q=${encodeURIComponent(text)}`)
          }}
        >
          <input
            type="search"
            aria-label="Search spans"
            placeholder="Search spans…"
            value={query}
            onChange={(e) => setQuery(e.target.value)}
          />
        </form>
        <div className="account">
          <AccountName />
          <button type="button" className="quiet" onClick={() => signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <main className="content">{props.children}</main>
    </div>
  )
}
