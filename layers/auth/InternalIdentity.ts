import { Context } from "effect"
import type { Principal } from "./Credentials.ts"

/**
 * An identity injected in process, never sent over the wire: a background batch runs its operations through
 * the API's own handlers as the account that submitted it, without storing that caller's credential. Only
 * code inside the process can provide it (there is no header for it); Authentication accepts it as is.
 */
export class InternalIdentity extends Context.Tag("tapedeck/InternalIdentity")<InternalIdentity, Principal>() {}
