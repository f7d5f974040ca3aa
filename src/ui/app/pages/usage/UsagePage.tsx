import { formatCost, formatCount } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { navigate } from "../../shell/router.tsx"
import { useApi } from "../../shell/useApi.ts"
import "../settings/settings.css"

const MONTH = /^\d{4}-(0[1-9]|1[0-2])$/

const Figure = (props: { readonly label: string; readonly value: string; readonly note?: string }) => (
  <div className="usage-figure" role="group" aria-label={props.label}>
    <div className="delta-label">{props.label}</div>
    <div className="usage-value mono">{props.value}</div>
    {props.note !== undefined && <div className="muted">{props.note}</div>}
  </div>
)

/** /ui/usage?month=YYYY-MM: the account's usage in a calendar month (UTC), the current one by default. */
export const UsagePage = (props: PageProps) => {
  const requested = props.search.get("month") ?? ""
  const month = MONTH.test(requested) ? requested : undefined
  const usage = useApi((client) => client.usage.get({ urlParams: month === undefined ? {} : { month } }), [month])
  const u = usage.data
  const used = u === undefined || u.replays.allowance === 0 ? 0 : Math.min(1, u.replays.used / u.replays.allowance)
  return (
    <section className="page">
      <h1>Usage</h1>
      <label>
        Month{" "}
        <input
          type="month"
          value={u?.month ?? month ?? ""}
          onChange={(e) => {
            if (MONTH.test(e.target.value)) navigate(`/ui/usage?month=${e.target.value}`, { replace: true })
          }}
        />
      </label>
      {usage.status === "error" && (
        <p role="alert" className="error-text">
          {usage.error.message}
        </p>
      )}
      {u !== undefined && (
        <>
          <div className="usage-grid">
            <Figure
              label="Traces recorded"
              value={formatCount(u.traces.recorded)}
              note={`${formatCount(u.traces.spans)} spans`}
            />
            <Figure label="OTLP exports" value={formatCount(u.otlp.requests)} />
            <Figure
              label="Replays"
              value={`${formatCount(u.replays.used)} / ${formatCount(u.replays.allowance)}`}
              note={`${formatCount(u.replays.remaining)} left · ${formatCount(u.replays.tokens)} tokens · ${formatCost(u.replays.cost)}`}
            />
            <Figure
              label="Evaluation runs"
              value={formatCount(u.evaluations.runs)}
              note={`${formatCount(u.evaluations.judgeTokens)} judge tokens · ${formatCost(u.evaluations.judgeCost)}`}
            />
            <Figure label="Searches" value={formatCount(u.search.queries)} />
          </div>
          <div className="allowance">
            <label htmlFor="replay-allowance" className="muted">
              Replay allowance used
            </label>
            <meter id="replay-allowance" min={0} max={1} low={0.7} high={0.9} optimum={0} value={used}>
              {Math.round(used * 100)}%
            </meter>
          </div>
          <p className="muted">
            Period {u.periodStart.slice(0, 10)} to {u.periodEnd.slice(0, 10)} (UTC, end exclusive).
          </p>
        </>
      )}
    </section>
  )
}
