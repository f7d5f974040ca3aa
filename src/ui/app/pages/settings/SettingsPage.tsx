import { useState } from "react"
import "./settings.css"
import type { ApiCallError } from "../../api/client.ts"
import { formatTime } from "../../format.ts"
import type { PageProps } from "../../routes.tsx"
import { useApi, useRunCall } from "../../shell/useApi.ts"

/** /ui/settings: the account's API keys: create one (shown once), revoke one. */
export const SettingsPage = (_props: PageProps) => {
  const run = useRunCall()
  const keys = useApi((client) => client.apiKeys.list(), [])
  const [name, setName] = useState("")
  const [created, setCreated] = useState<{ readonly name: string; readonly key: string } | undefined>(undefined)
  const [error, setError] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)

  const create = async () => {
    setBusy(true)
    setError(undefined)
    try {
      const key = await run((client) => client.apiKeys.create({ payload: { name: name.trim() } }))
      setCreated({ name: key.name ?? "", key: key.key })
      setName("")
      keys.reload()
    } catch (e) {
      setError((e as ApiCallError).message)
    } finally {
      setBusy(false)
    }
  }
  const revoke = async (id: string, label: string) => {
    if (!window.confirm(`Revoke the key “${label}”? Requests with it are refused from now on.`)) return
    setError(undefined)
    try {
      await run((client) => client.apiKeys.revoke({ path: { keyId: id } }))
    } catch (e) {
      setError((e as ApiCallError).message)
    }
    keys.reload()
  }

  return (
    <section className="page">
      <h1>Settings</h1>
      <h2>API keys</h2>
      {keys.status === "error" && (
        <p role="alert" className="error-text">
          {keys.error.message}
        </p>
      )}
      {error !== undefined && (
        <p role="alert" className="error-text">
          {error}
        </p>
      )}
      {created !== undefined && (
        <div role="status" className="created-key">
          New key “{created.name}”, shown this once — copy it now:
          <input
            aria-label="New API key"
            readOnly
            className="mono"
            value={created.key}
            size={60}
            onFocus={(e) => e.target.select()}
          />
          <button type="button" onClick={() => void navigator.clipboard?.writeText(created.key)}>
            Copy
          </button>
          <button type="button" className="quiet" onClick={() => setCreated(undefined)}>
            Done
          </button>
        </div>
      )}
      <table className="dense" aria-label="API keys">
        <thead>
          <tr>
            <th>Name</th>
            <th>Prefix</th>
            <th>Created</th>
            <th>Last used</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {keys.data?.items.map((k) => (
            <tr key={k.id}>
              <td>{k.name ?? <span className="muted">unnamed</span>}</td>
              <td className="mono">{k.prefix}…</td>
              <td>{formatTime(new Date(k.createdAt))}</td>
              <td>{k.lastUsedAt === null ? "never" : formatTime(new Date(k.lastUsedAt))}</td>
              <td className="actions">
                <button
                  type="button"
                  className="quiet danger"
                  aria-label={`Revoke ${k.name ?? k.prefix}`}
                  onClick={() => void revoke(k.id, k.name ?? k.prefix)}
                >
                  Revoke
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {keys.data?.items.length === 0 && (
        <p className="muted">No keys created here (keys from the server's configuration are not listed).</p>
      )}
      <form
        className="create-key"
        aria-label="Create an API key"
        onSubmit={(e) => {
          e.preventDefault()
          if (name.trim() !== "") void create()
        }}
      >
        <label>
          Key name <input value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />
        </label>
        <button type="submit" disabled={busy || name.trim() === ""}>
          Create key
        </button>
      </form>
    </section>
  )
}
