import type { PageProps } from "../../routes.tsx"

/** Span search. */
export const SearchPage = (props: PageProps) => (
  <section className="page">
    <h1>Search</h1>
    <p className="muted">{props.search.get("q") ?? ""}</p>
  </section>
)
