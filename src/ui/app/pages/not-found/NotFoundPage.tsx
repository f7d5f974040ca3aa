import { Link } from "../../shell/router.tsx"

/** Any /ui path no route knows. */
export const NotFoundPage = () => (
  <section className="page empty">
    <h1>Not found</h1>
    <p className="muted">
      There is no such page. <Link href="/ui/traces">Back to traces</Link>
    </p>
  </section>
)
