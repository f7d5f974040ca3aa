import { SqlClient } from "@effect/sql"
import { PgMigrator } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import m0001 from "./migrations/0001_accounts.ts"
import m0002 from "./migrations/0002_traces.ts"
import m0003 from "./migrations/0003_jobs.ts"
import m0004 from "./migrations/0004_spans_without_fk.ts"
import m0005 from "./migrations/0005_forks.ts"
import m0006 from "./migrations/0006_sdk_replay.ts"
import m0007 from "./migrations/0007_enforcement.ts"
import m0008 from "./migrations/0008_evaluations.ts"
import m0009 from "./migrations/0009_eval_rules.ts"
import m0011 from "./migrations/0011_usage_and_keys.ts"
import m0012 from "./migrations/0012_stream_events.ts"
import m0010 from "./migrations/0010_search.ts"
import m0013 from "./migrations/0013_search_filters.ts"
import m0014 from "./migrations/0014_live_key_guard.ts"
import m0015 from "./migrations/0015_enforcement_check_functions.ts"
import m0016 from "./migrations/0016_stream_listeners.ts"
import m0017 from "./migrations/0017_lz4_compression.ts"
import m0018 from "./migrations/0018_span_payloads_json.ts"
import m0019 from "./migrations/0019_trace_list_filters.ts"
import m0020 from "./migrations/0020_enforcement_check_batch.ts"
import m0021 from "./migrations/0021_enforcement_allowed_decisions.ts"
import m0026 from "./migrations/0026_search_sign_bits.ts"
import m0029 from "./migrations/0029_enforcement_blocks_write_nothing.ts"
import m0030 from "./migrations/0030_shared_span_content.ts"
import m0031 from "./migrations/0031_retention_settings.ts"
import m0032 from "./migrations/0032_shared_parts_one_pass.ts"
import m0033 from "./migrations/0033_content_refs_unindexed.ts"
import m0034 from "./migrations/0034_share_trigger_when.ts"
import m0036 from "./migrations/0036_search_half_vectors.ts"
import m0037 from "./migrations/0037_search_fulltext_compact.ts"
import m0038 from "./migrations/0038_enforcement_run_actions.ts"
import m0040 from "./migrations/0040_release_parts_in_order.ts"
import m0041 from "./migrations/0041_shared_message_leaves.ts"
import m0042 from "./migrations/0042_released_parts_recorded.ts"
import m0043 from "./migrations/0043_packed_parts.ts"
import m0044 from "./migrations/0044_search_row_compact.ts"
import m0045 from "./migrations/0045_packed_parts_sent.ts"
import m0046 from "./migrations/0046_search_lexeme_hashes.ts"
import m0047 from "./migrations/0047_refs_delta_text.ts"
import m0048 from "./migrations/0048_search_filter_indexes_partial.ts"
import m0049 from "./migrations/0049_parts_numbered_as_met.ts"
import m0050 from "./migrations/0050_enforcement_lock_runs.ts"

/** Forward-only migrations, run at start. Never edit one once merged: add the next. */
const MIGRATIONS: Record<string, Effect.Effect<unknown, unknown, SqlClient.SqlClient>> = {
  "0001_accounts": m0001,
  "0002_traces": m0002,
  "0003_jobs": m0003,
  "0004_spans_without_fk": m0004,
  "0005_forks": m0005,
  "0006_sdk_replay": m0006,
  "0007_enforcement": m0007,
  "0008_evaluations": m0008,
  "0009_eval_rules": m0009,
  "0010_search": m0010,
  "0011_usage_and_keys": m0011,
  "0012_stream_events": m0012,
  "0013_search_filters": m0013,
  "0014_live_key_guard": m0014,
  "0015_enforcement_check_functions": m0015,
  "0016_stream_listeners": m0016,
  "0017_lz4_compression": m0017,
  "0018_span_payloads_json": m0018,
  "0019_trace_list_filters": m0019,
  "0020_enforcement_check_batch": m0020,
  "0021_enforcement_allowed_decisions": m0021,
  "0026_search_sign_bits": m0026,
  "0029_enforcement_blocks_write_nothing": m0029,
  "0030_shared_span_content": m0030,
  "0031_retention_settings": m0031,
  "0032_shared_parts_one_pass": m0032,
  "0033_content_refs_unindexed": m0033,
  "0034_share_trigger_when": m0034,
  "0036_search_half_vectors": m0036,
  "0037_search_fulltext_compact": m0037,
  "0038_enforcement_run_actions": m0038,
  "0040_release_parts_in_order": m0040,
  "0041_shared_message_leaves": m0041,
  "0042_released_parts_recorded": m0042,
  "0043_packed_parts": m0043,
  "0044_search_row_compact": m0044,
  "0045_packed_parts_sent": m0045,
  "0046_search_lexeme_hashes": m0046,
  "0047_refs_delta_text": m0047,
  "0048_search_filter_indexes_partial": m0048,
  "0049_parts_numbered_as_met": m0049,
  "0050_enforcement_lock_runs": m0050
}

/** The migrator's own bookkeeping table (PgMigrator's default). */
const TABLE = "effect_sql_migrations"

/**
 * Migrations the migrator skipped: it runs only ids above the highest one recorded, so a migration merged after a
 * higher-numbered one had already run (numbers are reserved per change, and changes land in any order) would never
 * run on such a database. Each is run here, in id order, recorded as the migrator records its own, under the same
 * table lock, so that instances starting together run it once.
 */
const runSkipped = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`LOCK TABLE ${sql(TABLE)} IN ACCESS EXCLUSIVE MODE`
      const applied = new Set(
        (yield* sql<{ id: number }>`SELECT migration_id AS id FROM ${sql(TABLE)}`).map((r) => Number(r.id))
      )
      for (const key of Object.keys(MIGRATIONS).sort()) {
        const [, id, name] = /^(\d+)_(.+)$/.exec(key)!
        if (applied.has(Number(id))) continue
        yield* sql`INSERT INTO ${sql(TABLE)} (migration_id, name) VALUES (${Number(id)}, ${name!})`
        yield* MIGRATIONS[key]!
        yield* Effect.logInfo(`ran migration ${key}, which was merged after a later one had run`)
      }
    })
  )
}).pipe(Effect.orDie)

export const MigrationsLive = Layer.effectDiscard(runSkipped).pipe(
  Layer.provide(PgMigrator.layer({ loader: PgMigrator.fromRecord(MIGRATIONS) }))
)
