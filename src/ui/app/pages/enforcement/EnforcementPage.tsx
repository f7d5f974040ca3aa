import { Either } from "effect"
import { useEffect, useState } from "react"
import { ApiCallError } from "../../api/client.ts"
import { formatTime } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { Link } from "../../shell/router.tsx"
import { useSession } from "../../shell/session.tsx"
import { useApi, useRunCall } from "../../shell/useApi.ts"
import {
  createGuardrailBody,
  type GuardrailDraft,
  type InstalledType,
  installedTypesOf,
  isBuiltInPolicyType,
  newGuardrailDraft,
  POLICY_TYPES,
  updateGuardrailBody
} from "./guardrailDraft.ts"
import { type HoldView, readDecision, readHold } from "./holds.ts"
import "./enforcement.css"

/** How often the holds queue and the decisions are read again: the API has no push for holds, so the page polls. */
const LIVE_POLL_MS = 2000

/** Re-runs `reload` every `ms` while the page is visible. */
const usePolling = (reload: () => void, ms: number) => {
  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") reload()
    }, ms)
    return () => clearInterval(timer)
  }, [reload, ms])
}

type Guardrail = {
  readonly id: string
  readonly type: string
  readonly name: string | null
  readonly projectId: string | null
  readonly enabled: boolean
  readonly params: unknown
  readonly updatedAt: string
}

/** The guardrail types extensions installed on this server, read from its OpenAPI document once. */
const useInstalledTypes = () => {
  const [types, setTypes] = useState<ReadonlyArray<InstalledType>>([])
  useEffect(() => {
    const abort = new AbortController()
    fetch("/openapi.json", { signal: abort.signal })
      .then((r) => (r.ok ? r.json() : undefined))
      .then((spec) => abort.signal.aborted || setTypes(installedTypesOf(spec)))
      .catch(() => {})
    return () => abort.abort()
  }, [])
  return types
}

/**
 * Creates a guardrail of an installed type: the typed client encodes bodies with the built-in types' schema, so this
 * one is sent as JSON (the server checks its params with the type's schema).
 */
const createInstalledType = async (key: string, body: unknown) => {
  const r = await fetch("/api/v1/guardrails", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  if (r.ok) return
  const answer = (await r.json().catch(() => ({}))) as { error?: string; code?: string }
  throw new ApiCallError(answer.code ?? "http", answer.error ?? `HTTP ${r.status}`, r.status)
}

/** The create/edit form of a guardrail. Editing keeps the type and project (the API does not change them). */
const GuardrailForm = (props: {
  readonly initial: GuardrailDraft
  readonly editing?: string
  readonly onDone: () => void
  readonly onCancel?: () => void
}) => {
  const run = useRunCall()
  const { key } = useSession()
  const installed = useInstalledTypes()
  const [draft, setDraft] = useState(props.initial)
  const [error, setError] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const body = props.editing === undefined ? createGuardrailBody(draft) : updateGuardrailBody(draft)

  const save = async () => {
    if (Either.isLeft(body)) return setError(body.left)
    setBusy(true)
    setError(undefined)
    try {
      const id = props.editing
      if (id === undefined) {
        const created = Either.getOrThrow(createGuardrailBody(draft))
        if (isBuiltInPolicyType(draft.type)) {
          await run((client) => client.enforcement.createGuardrail({ payload: created }))
        } else {
          await createInstalledType(key, created)
        }
        setDraft(newGuardrailDraft(draft.type, installed.find((t) => t.type === draft.type)?.example))
      } else {
        const update = Either.getOrThrow(updateGuardrailBody(draft))
        await run((client) => client.enforcement.updateGuardrail({ path: { id }, payload: update }))
      }
      props.onDone()
    } catch (e) {
      setError((e as ApiCallError).message)
    } finally {
      setBusy(false)
    }
  }

  return (
    <form
      className="guardrail-form"
      aria-label={props.editing === undefined ? "New guardrail" : "Edit guardrail"}
      onSubmit={(e) => {
        e.preventDefault()
        void save()
      }}
    >
      <div className="row">
        <label>
          Type
          <select
            value={draft.type}
            disabled={props.editing !== undefined}
            onChange={(e) =>
              setDraft({
                ...newGuardrailDraft(e.target.value, installed.find((t) => t.type === e.target.value)?.example),
                name: draft.name,
                projectId: draft.projectId
              })
            }
          >
            {POLICY_TYPES.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
            {installed.map(({ type }) => (
              <option key={type} value={type}>
                {type} (extension)
              </option>
            ))}
            {!isBuiltInPolicyType(draft.type) && !installed.some((t) => t.type === draft.type) && (
              <option value={draft.type}>{draft.type}</option>
            )}
          </select>
        </label>
        <label>
          Name <input value={draft.name} onChange={(e) => setDraft({ ...draft, name: e.target.value })} />
        </label>
        <label>
          Project id
          <input
            className="mono"
            value={draft.projectId}
            size={36}
            disabled={props.editing !== undefined}
            placeholder="all projects"
            onChange={(e) => setDraft({ ...draft, projectId: e.target.value })}
          />
        </label>
        <label className="check">
          <input
            type="checkbox"
            checked={draft.enabled}
            onChange={(e) => setDraft({ ...draft, enabled: e.target.checked })}
          />{" "}
          Enabled
        </label>
      </div>
      <label className="field">
        Parameters (JSON)
        <textarea
          className="mono"
          rows={4}
          value={draft.paramsText}
          onChange={(e) => setDraft({ ...draft, paramsText: e.target.value })}
        />
      </label>
      {error !== undefined && (
        <p role="alert" className="error-text">
          {error}
        </p>
      )}
      {error === undefined && Either.isLeft(body) && <p className="muted">{body.left}</p>}
      <div className="row">
        <button type="submit" disabled={busy || Either.isLeft(body)}>
          {props.editing === undefined ? "Create guardrail" : "Save guardrail"}
        </button>
        {props.onCancel && (
          <button type="button" className="quiet" onClick={props.onCancel}>
            Cancel
          </button>
        )}
      </div>
    </form>
  )
}

const draftOf = (g: Guardrail): GuardrailDraft => ({
  type: g.type,
  name: g.name ?? "",
  projectId: g.projectId ?? "",
  enabled: g.enabled,
  paramsText: JSON.stringify(g.params, null, 2)
})

const Guardrails = () => {
  const run = useRunCall()
  const list = useApi((client) => client.enforcement.listGuardrails(), [])
  const [editing, setEditing] = useState<string | undefined>(undefined)
  const [error, setError] = useState<string | undefined>(undefined)
  const act = async (what: () => Promise<unknown>) => {
    setError(undefined)
    try {
      await what()
    } catch (e) {
      setError((e as ApiCallError).message)
    }
    list.reload()
  }
  const label = (g: Guardrail) => g.name ?? g.type
  return (
    <section aria-label="Guardrails">
      <h2>Guardrails</h2>
      {list.status === "error" && (
        <p role="alert" className="error-text">
          {list.error.message}
        </p>
      )}
      {error !== undefined && (
        <p role="alert" className="error-text">
          {error}
        </p>
      )}
      <table className="dense" aria-label="Guardrails list">
        <thead>
          <tr>
            <th>Name</th>
            <th>Type</th>
            <th>Parameters</th>
            <th>Project</th>
            <th>State</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((g) =>
            editing === g.id ? (
              <tr key={g.id}>
                <td colSpan={6}>
                  <GuardrailForm
                    initial={draftOf(g)}
                    editing={g.id}
                    onDone={() => {
                      setEditing(undefined)
                      list.reload()
                    }}
                    onCancel={() => setEditing(undefined)}
                  />
                </td>
              </tr>
            ) : (
              <tr key={g.id} className={g.enabled ? "" : "disabled"}>
                <td>{g.name ?? <span className="muted">unnamed</span>}</td>
                <td className="mono">{g.type}</td>
                <td className="mono wrap">{JSON.stringify(g.params)}</td>
                <td className="mono">{g.projectId ? g.projectId.slice(0, 8) : "all"}</td>
                <td>{g.enabled ? "enabled" : "disabled"}</td>
                <td className="actions">
                  <button
                    type="button"
                    className="quiet"
                    aria-label={`${g.enabled ? "Disable" : "Enable"} ${label(g)}`}
                    onClick={() =>
                      void act(() =>
                        run((client) =>
                          client.enforcement.updateGuardrail({ path: { id: g.id }, payload: { enabled: !g.enabled } })
                        )
                      )
                    }
                  >
                    {g.enabled ? "Disable" : "Enable"}
                  </button>
                  <button
                    type="button"
                    className="quiet"
                    aria-label={`Edit ${label(g)}`}
                    onClick={() => setEditing(g.id)}
                  >
                    Edit
                  </button>
                  <button
                    type="button"
                    className="quiet danger"
                    aria-label={`Delete ${label(g)}`}
                    onClick={() => {
                      if (window.confirm(`Delete the guardrail “${label(g)}”?`))
                        void act(() => run((client) => client.enforcement.deleteGuardrail({ path: { id: g.id } })))
                    }}
                  >
                    Delete
                  </button>
                </td>
              </tr>
            )
          )}
        </tbody>
      </table>
      {list.data?.items.length === 0 && <p className="muted">No guardrails: every check is allowed.</p>}
      <details className="new-guardrail">
        <summary>New guardrail</summary>
        <GuardrailForm initial={newGuardrailDraft()} onDone={list.reload} />
      </details>
    </section>
  )
}

/** One pending hold: what is waiting, and Approve / Deny with an optional reason. */
const HoldRow = (props: { readonly hold: HoldView; readonly onDecided: () => void }) => {
  const run = useRunCall()
  const [reason, setReason] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string | undefined>(undefined)
  const h = props.hold
  const what = h.toolName ?? h.model ?? "action"
  const decide = async (decision: "approve" | "deny") => {
    setBusy(true)
    setError(undefined)
    try {
      const payload = reason.trim() === "" ? {} : { reason: reason.trim() }
      if (decision === "approve")
        await run((client) => client.enforcement.approveHold({ path: { holdId: h.id }, payload }))
      else await run((client) => client.enforcement.denyHold({ path: { holdId: h.id }, payload }))
      props.onDecided()
    } catch (e) {
      setError((e as ApiCallError).message)
      props.onDecided()
    } finally {
      setBusy(false)
    }
  }
  return (
    <li className="hold" aria-label={`Hold: ${what} in run ${h.runId}`}>
      <div className="hold-what">
        <strong className="mono">{what}</strong> <span className="muted">in run</span>{" "}
        <span className="mono">{h.runId}</span>
        <div className="muted">
          {h.reason ?? ""} · since {formatTime(new Date(h.createdAt))}
          {h.expiresAt ? ` · expires ${formatTime(new Date(h.expiresAt))}` : ""}
          {h.toolArgsHash ? (
            <>
              {" "}
              · args <span className="mono">{h.toolArgsHash.slice(0, 12)}</span>
            </>
          ) : null}
        </div>
      </div>
      <input
        aria-label={`Reason for ${what} in run ${h.runId}`}
        placeholder="Reason (optional)"
        value={reason}
        onChange={(e) => setReason(e.target.value)}
        disabled={busy}
      />
      <button type="button" className="approve" disabled={busy} onClick={() => void decide("approve")}>
        Approve
      </button>
      <button type="button" className="deny" disabled={busy} onClick={() => void decide("deny")}>
        Deny
      </button>
      {error !== undefined && (
        <p role="alert" className="error-text">
          {error}
        </p>
      )}
    </li>
  )
}

const Holds = () => {
  const holds = useApi((client) => client.enforcement.listHolds({ urlParams: { status: "pending" } }), [])
  usePolling(holds.reload, LIVE_POLL_MS)
  const items = (holds.data?.items ?? []).flatMap((item) => {
    const hold = readHold(item)
    return hold === undefined || hold.status !== "pending" ? [] : [hold]
  })
  return (
    <section aria-label="Holds queue">
      <h2>
        Holds queue <span className="muted">{items.length} pending · live</span>
      </h2>
      {holds.status === "error" && (
        <p role="alert" className="error-text">
          {holds.error.message}
        </p>
      )}
      {items.length === 0 ? (
        <p className="muted">Nothing is waiting for a decision.</p>
      ) : (
        <ul className="holds" aria-label="Pending holds">
          {items.map((h) => (
            <HoldRow key={h.id} hold={h} onDecided={holds.reload} />
          ))}
        </ul>
      )}
    </section>
  )
}

const Decisions = () => {
  const [runFilter, setRunFilter] = useState("")
  const runId = runFilter.trim()
  const decisions = useApi(
    (client) =>
      client.enforcement.listDecisions({ urlParams: { limit: 100, ...(runId === "" ? {} : { run_id: runId }) } }),
    [runId]
  )
  usePolling(decisions.reload, LIVE_POLL_MS * 2)
  const items = (decisions.data?.items ?? []).flatMap((item) => {
    const d = readDecision(item)
    return d === undefined ? [] : [d]
  })
  return (
    <section aria-label="Recent decisions">
      <h2>Recent decisions</h2>
      <label>
        Run id{" "}
        <input
          className="mono"
          value={runFilter}
          onChange={(e) => setRunFilter(e.target.value)}
          placeholder="all runs"
        />
      </label>
      <table className="dense" aria-label="Decisions">
        <thead>
          <tr>
            <th>When</th>
            <th>Verdict</th>
            <th>Run</th>
            <th>Action</th>
            <th>Policy</th>
            <th>Reason</th>
            <th>Latency</th>
          </tr>
        </thead>
        <tbody>
          {items.map((d) => (
            <tr key={d.id}>
              <td>{formatTime(new Date(d.createdAt))}</td>
              <td className={`verdict v-${d.verdict}`}>{d.verdict}</td>
              <td className="mono">{d.traceId ? <Link href={`/ui/traces/${d.traceId}`}>{d.runId}</Link> : d.runId}</td>
              <td className="mono">{d.toolName ?? d.model ?? "—"}</td>
              <td className="mono">{d.policyType ?? "—"}</td>
              <td className="wrap">{d.reason}</td>
              <td className="mono">{d.latencyMs === null ? "—" : `${d.latencyMs.toFixed(1)} ms`}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {decisions.status === "ok" && items.length === 0 && <p className="muted">No decisions recorded.</p>}
    </section>
  )
}

/** /ui/enforcement: the holds queue (live), guardrails, and recent decisions. */
export const EnforcementPage = (_props: PageProps) => (
  <section className="page enforcement-page">
    <h1>Enforcement</h1>
    <Holds />
    <Guardrails />
    <Decisions />
  </section>
)
