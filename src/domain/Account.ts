import { Schema } from "effect"
import { AccountId } from "./Ids.ts"

/** The account a credential acts for (GET /api/v1/account). */
export const AccountInfo = Schema.Struct({
  id: AccountId.annotations({ description: "The account's id" }),
  name: Schema.String.annotations({ description: "The account's name, as API keys and JWTs name it" })
}).annotations({ identifier: "AccountInfo" })
export type AccountInfo = typeof AccountInfo.Type
