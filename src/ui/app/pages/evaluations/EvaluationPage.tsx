import { useState } from "react"
import type { EvaluationId, EvaluationRunId } from "../../../../domain/Evaluation.ts"
import type { TraceId } from "../../../../domain/Ids.ts"
import type { ApiCallError } from "../../api/client.ts"
import { formatCost, formatCount, formatTime } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { Link } from "../../shell/router.tsx"
import { useApi, useRunCall } from "../../shell/useApi.ts"
import "./evaluations.css"

interface RunView {
  readonly id: string
  readonly traceId: string
  readonly status: string
  readonly score: number | null
  readonly criterionScores: ReadonlyArray<{
    readonly name: string
    readonly weight: number
    readonly score: number
    readonly reason: string
  }>
  readonly reasoning: string | null
  readonly judgeModel: string
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUsd: number | null
  readonly error: string | null
  readonly createdAt: string
  readonly reused?: boolean
}

const score = (n: number | null) => (n === null ? "—" : n.toFixed(3))

/** Runs with their per-criterion scores and the judge's reasons (a row expands to show them). */
const RunsTable = (props: { readonly runs: ReadonlyArray<RunView>; readonly label: string }) => (
  <table className="dense runs" aria-label={props.label}>
    <thead>
      <tr>
        <th>Trace</th>
        <th>Status</th>
        <th>Score</th>
        <th>Criteria (score · reason)</th>
        <th>Judge</th>
        <th>Tokens</th>
        <th>Cost</th>
        <th>Created</th>
      </tr>
    </thead>
    <tbody>
      {props.runs.map((r) => (
        <tr key={r.id}>
          <td className="mono">
            <Link href={`/ui/traces/${r.traceId}`}>{r.traceId.slice(0, 8)}</Link>
            {r.reused ? <span className="muted"> reused</span> : null}
          </td>
          <td className={r.status === "failed" ? "error-text" : ""}>{r.status}</td>
          <td className="mono">{score(r.score)}</td>
          <td className="criteria-cell">
            {r.error !== null && <div className="error-text">{r.error}</div>}
            {r.criterionScores.map((c) => (
              <details key={c.name}>
                <summary>
                  <span className="mono">{c.score.toFixed(2)}</span> {c.name} <span className="muted">×{c.weight}</span>
                </summary>
                <p>{c.reason}</p>
              </details>
            ))}
          </td>
          <td className="mono">{r.judgeModel}</td>
          <td>{formatCount(r.inputTokens + r.outputTokens)}</td>
          <td>{r.costUsd === null ? "—" : formatCost(r.costUsd)}</td>
          <td>{formatTime(new Date(r.createdAt))}</td>
        </tr>
      ))}
    </tbody>
  </table>
)

const traceIdsOf = (text: string) => [...new Set(text.split(/[\s,]+/).filter((s) => s !== ""))]

type GateResult = {
  readonly passed: boolean
  readonly score: number
  readonly threshold: number
  readonly regression: boolean
  readonly baseline_score?: number | undefined
  readonly judge_model: string
  readonly reasons: ReadonlyArray<string>
  readonly runs: ReadonlyArray<RunView>
}

/** Queue runs, or gate traces against a threshold now; the gate's verdict, score and runs are shown below. */
const RunAndGate = (props: { readonly evaluationId: EvaluationId; readonly onQueued: () => void }) => {
  const run = useRunCall()
  const [ids, setIds] = useState("")
  const [threshold, setThreshold] = useState("0.7")
  const [baseline, setBaseline] = useState("")
  const [failOnRegression, setFailOnRegression] = useState(true)
  const [busy, setBusy] = useState<"run" | "gate" | undefined>(undefined)
  const [message, setMessage] = useState<string | undefined>(undefined)
  const [gate, setGate] = useState<GateResult | undefined>(undefined)
  const traceIds = traceIdsOf(ids)

  const queue = async () => {
    setBusy("run")
    setMessage(undefined)
    try {
      const result = await run((client) =>
        client.evaluations.run({
          path: { evaluationId: props.evaluationId },
          payload: { trace_ids: traceIds as Array<TraceId> }
        })
      )
      setMessage(`${result.runs.length} run${result.runs.length === 1 ? "" : "s"} queued.`)
      props.onQueued()
    } catch (e) {
      setMessage((e as ApiCallError).message)
    } finally {
      setBusy(undefined)
    }
  }
  const runGate = async () => {
    setBusy("gate")
    setMessage(undefined)
    setGate(undefined)
    try {
      const baselineIds = traceIdsOf(baseline)
      const result = await run((client) =>
        client.evaluations.gate({
          path: { evaluationId: props.evaluationId },
          payload: {
            trace_ids: traceIds as Array<TraceId>,
            threshold: Number(threshold),
            fail_on_regression: failOnRegression,
            ...(baselineIds.length > 0 ? { baseline_run_ids: baselineIds as Array<EvaluationRunId> } : {})
          }
        })
      )
      setGate(result as GateResult)
      props.onQueued()
    } catch (e) {
      setMessage((e as ApiCallError).message)
    } finally {
      setBusy(undefined)
    }
  }
  return (
    <section aria-label="Run or gate" className="run-gate">
      <h2>Run or gate</h2>
      <label className="field">
        Trace ids (1 to 50, separated by spaces or commas)
        <textarea className="mono" rows={2} value={ids} onChange={(e) => setIds(e.target.value)} />
      </label>
      <div className="row">
        <label>
          Threshold{" "}
          <input
            type="number"
            min={0}
            max={1}
            step={0.05}
            value={threshold}
            onChange={(e) => setThreshold(e.target.value)}
          />
        </label>
        <label>
          Baseline run ids{" "}
          <input className="mono" value={baseline} onChange={(e) => setBaseline(e.target.value)} size={40} />
        </label>
        <label className="check">
          <input type="checkbox" checked={failOnRegression} onChange={(e) => setFailOnRegression(e.target.checked)} />{" "}
          Fail on regression
        </label>
      </div>
      <div className="row">
        <button type="button" disabled={busy !== undefined || traceIds.length === 0} onClick={() => void queue()}>
          {busy === "run" ? "Queueing…" : "Queue runs"}
        </button>
        <button type="button" disabled={busy !== undefined || traceIds.length === 0} onClick={() => void runGate()}>
          {busy === "gate" ? "Judging…" : "Run gate"}
        </button>
      </div>
      {message !== undefined && <p role="status">{message}</p>}
      {gate !== undefined && (
        <section aria-label="Gate result" className={`gate ${gate.passed ? "passed" : "failed"}`}>
          <h2>{gate.passed ? "PASSED" : "FAILED"}</h2>
          <p className="mono">
            score {gate.score.toFixed(4)} · threshold {gate.threshold.toFixed(4)}
            {gate.baseline_score !== undefined ? ` · baseline ${gate.baseline_score.toFixed(4)}` : ""} · regression{" "}
            {gate.regression ? "yes" : "no"} · judge {gate.judge_model}
          </p>
          {gate.reasons.length > 0 && (
            <ul>
              {gate.reasons.map((r, i) => (
                <li key={i}>{r}</li>
              ))}
            </ul>
          )}
          <RunsTable runs={gate.runs} label="Gate runs" />
        </section>
      )}
    </section>
  )
}

/** /ui/evaluations/{id}: the criteria, the caller's recent runs with per-criterion scores and reasons, run and gate. */
export const EvaluationPage = (props: PageProps) => {
  const evaluationId = props.params.evaluationId! as EvaluationId
  const detail = useApi((client) => client.evaluations.get({ path: { evaluationId } }), [evaluationId])
  if (detail.status === "error" && detail.data === undefined) {
    return (
      <section className="page">
        <p role="alert" className="error-text">
          {detail.error.code === "not_found" ? "No such evaluation visible to this account." : detail.error.message}
        </p>
      </section>
    )
  }
  if (detail.data === undefined)
    return (
      <section className="page" aria-busy="true">
        Loading…
      </section>
    )
  const e = detail.data
  return (
    <section className="page">
      <h1>{e.name}</h1>
      {e.description && <p>{e.description}</p>}
      <p className="muted">
        Judge <span className="mono">{e.judgeModel}</span> · {e.isPublic ? "public" : "private"}
      </p>
      <table className="dense" aria-label="Criteria">
        <thead>
          <tr>
            <th>Criterion</th>
            <th>Weight</th>
            <th>Description</th>
          </tr>
        </thead>
        <tbody>
          {e.criteria.map((c) => (
            <tr key={c.name}>
              <td>{c.name}</td>
              <td className="mono">{c.weight}</td>
              <td className="wrap">{c.description}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <RunAndGate evaluationId={evaluationId} onQueued={detail.reload} />
      <h2>
        Recent runs{" "}
        <button type="button" className="quiet" onClick={detail.reload}>
          Refresh
        </button>
      </h2>
      <RunsTable runs={e.runs} label="Runs" />
      {e.runs.length === 0 && <p className="muted">No runs of yours yet.</p>}
    </section>
  )
}
