import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { uuidArray } from "../storage/SqlArrays.ts"

/** A listener row not refreshed for this long belongs to an instance that is gone (refreshed every minute). */
const STALE_AFTER_MINUTES = 5

/**
 * This instance's rows of `stream_listeners` (migration 0016): the accounts it has live subscribers for, so that
 * writes of those accounts NOTIFY (StreamEvents.inStatement) and writes of the others do not.
 */
export const streamListeners = (sql: SqlClient.SqlClient, instanceId: string) => ({
  /** Marks the accounts as watched here (again: a refresh); committed when it returns. */
  listen: (accountIds: ReadonlyArray<string>) =>
    accountIds.length === 0
      ? Effect.void
      : sql`
      INSERT INTO stream_listeners (account_id, instance_id)
      SELECT a, ${instanceId}::uuid FROM unnest(${uuidArray(accountIds)}::uuid[]) AS a
      ON CONFLICT (account_id, instance_id) DO UPDATE SET refreshed_at = now()`.pipe(Effect.asVoid),
  unlisten: (accountId: string) =>
    sql`DELETE FROM stream_listeners WHERE account_id = ${accountId}::uuid AND instance_id = ${instanceId}::uuid`.pipe(
      Effect.asVoid
    ),
  /** Forgets every account watched here (at shutdown). */
  release: sql`DELETE FROM stream_listeners WHERE instance_id = ${instanceId}::uuid`.pipe(Effect.asVoid),
  /** Removes the rows of instances that stopped refreshing them (they died without releasing). */
  pruneStale: sql`
    DELETE FROM stream_listeners
    WHERE refreshed_at < now() - make_interval(mins => ${STALE_AFTER_MINUTES})`.pipe(Effect.asVoid)
})
