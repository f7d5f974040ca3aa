import { useApi } from "./useApi.ts"

/** Who is signed in: the account's name, as the API tells it (GET /api/v1/account). */
export const AccountName = () => {
  const account = useApi((client) => client.account.get(), [])
  return (
    <span className="account-name" aria-label="Account">
      {account.data?.name ?? (account.status === "error" ? "account unknown" : "…")}
    </span>
  )
}
