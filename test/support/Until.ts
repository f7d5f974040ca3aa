import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { TestServer } from "./TestServer.ts"

/** Polls `probe` every 50 ms until it returns a value (not undefined); fails naming `what` after `timeoutMs`. */
export const until = async <A>(probe: () => Promise<A | undefined>, what: string, timeoutMs = 20_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(50)
  }
}

/** Runs SQL (with $1… parameters) against a test server's own database. */
export const sqlOn =
  (server: TestServer) =>
  <A extends object>(text: string, ...params: Array<unknown>) =>
    server.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        return yield* sql.unsafe<A>(text, params as Array<any>)
      }).pipe(Effect.orDie)
    )
