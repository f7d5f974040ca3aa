import { type FormEvent, useState } from "react"
import { makeApiClient, runCall } from "../api/client.ts"

/** The sign-in form: one "API key" field (an `svc_` key or a JWT), checked against the API before it is kept. */
export const SignIn = (props: { readonly onSignIn: (key: string) => void; readonly message?: string | undefined }) => {
  const [key, setKey] = useState("")
  const [error, setError] = useState(props.message)
  const [checking, setChecking] = useState(false)

  const submit = async (event: FormEvent) => {
    event.preventDefault()
    const candidate = key.trim()
    if (candidate === "") return setError("Enter an API key.")
    setChecking(true)
    try {
      // Who the key acts for: a key the API refuses never reaches the Studio's pages.
      await runCall(makeApiClient(candidate).account.get())
      props.onSignIn(candidate)
    } catch (e) {
      const failure = e as { code?: string; message?: string }
      setError(
        failure.code === "unauthorized"
          ? "That key was refused. Check it and try again."
          : `Could not sign in: ${failure.message}`
      )
      setChecking(false)
    }
  }

  return (
    <main className="signin">
      <form className="signin-card" onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">Tapedeck Studio</h1>
        <p className="muted">
          Sign in with an API key of your account (an <code>svc_</code> key or a JWT).
        </p>
        <label htmlFor="signin-key">API key</label>
        <input
          id="signin-key"
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={key}
          onChange={(e) => setKey(e.target.value)}
          autoFocus
        />
        {error !== undefined && (
          <p role="alert" className="error-text">
            {error}
          </p>
        )}
        <button type="submit" disabled={checking}>
          {checking ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  )
}
