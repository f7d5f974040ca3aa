import type { PageProps } from "../../routes.tsx"
import { Link } from "../../shell/router.tsx"
import { useApi } from "../../shell/useApi.ts"

/** /ui/evaluations: the evaluations the account can see (its own and public ones), newest first. */
export const EvaluationsPage = (_props: PageProps) => {
  const list = useApi((client) => client.evaluations.list({ urlParams: { limit: 100, offset: 0 } }), [])
  return (
    <section className="page">
      <h1>Evaluations</h1>
      {list.status === "error" && (
        <p role="alert" className="error-text">
          {list.error.message}
        </p>
      )}
      <table className="dense" aria-label="Evaluations">
        <thead>
          <tr>
            <th>Name</th>
            <th>Judge</th>
            <th>Criteria</th>
            <th>Visibility</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((e) => (
            <tr key={e.id}>
              <td>
                <Link href={`/ui/evaluations/${e.id}`}>{e.name}</Link>
              </td>
              <td className="mono">{e.judgeModel}</td>
              <td>{e.criteria.map((c) => `${c.name} ×${c.weight}`).join(", ")}</td>
              <td>{e.isPublic ? "public" : "private"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.items.length === 0 && (
        <p className="muted">No evaluations yet (POST /api/v1/evaluations creates one).</p>
      )}
    </section>
  )
}
