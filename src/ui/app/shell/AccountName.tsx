import { useSession } from "./session.tsx"

/** Who is signed in. Until the API names the account, the key's visible prefix stands for it. */
export const AccountName = () => {
  const { key } = useSession()
  const shown = key.startsWith("svc_") ? `${key.slice(0, 8)}…${key.slice(-4)}` : "JWT"
  return <span className="account-name" aria-label="Account">{shown}</span>
}
