import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { PolicyStore } from "#layers/enforcement/PolicyStore"
import { SqlPolicyStoreLive } from "#layers/enforcement/SqlPolicyStore"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { Traces } from "#layers/traces/Traces"
import type { AccountId } from "#src/domain/Ids"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"
import { CredentialRevoked, PolicyStateUnavailable } from "#src/domain/Errors"

// Fail-closed: whatever keeps the policy state out of reach, the verdict is block, never allow.
let storage: TestStorage
let account: AccountId
beforeAll(async () => {
  // Each check here builds a store of its own and lets its late work (a block's record retried) outlive it: with a pool
  // of the store's own, that work would find the pool closed. The shared pool lives as long as the file.
  storage = await startTestStorage({ TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "100", TAPEDECK_ENFORCEMENT_DB_CONNECTIONS: "0" })
  account = await storage.run(
    Effect.flatMap(AccountRepo, (r) => r.ensure("enforcement")).pipe(Effect.provide(AccountRepo.Default))
  )
})
afterAll(() => storage.stop())

const withStore = <R>(store: Layer.Layer<PolicyStore, never, R>) =>
  Enforcement.DefaultWithoutDependencies.pipe(Layer.provide(store), Layer.provide([AppConfig.Default, Traces.Default]))

const failing = Layer.succeed(
  PolicyStore,
  PolicyStore.of({
    policies: () => Effect.fail(new PolicyStateUnavailable({ reason: "connection refused" })),
    decideAtomically: () => Effect.fail(new PolicyStateUnavailable({ reason: "connection refused" })),
    recordFailClosed: () => Effect.void,
    invalidate: () => Effect.void
  })
)

const hanging = Layer.succeed(
  PolicyStore,
  PolicyStore.of({
    policies: () => Effect.never,
    decideAtomically: () => Effect.never,
    recordFailClosed: () => Effect.void,
    invalidate: () => Effect.void
  })
)

const request = { run_id: "run-1", proposed_usd: 0.01 }

describe("fail-closed enforcement", () => {
  test("a store that fails: check answers block with policy_id and policy_type null", async () => {
    const decision = await storage.run(
      Effect.flatMap(Enforcement, (e) => e.check(account, request)).pipe(Effect.provide(withStore(failing)))
    )
    expect(decision).toEqual({
      verdict: "block",
      policy_id: null,
      policy_type: null,
      reason: "policy state unavailable: connection refused"
    })
  })

  test("a store that never answers: block after TAPEDECK_ENFORCEMENT_TIMEOUT_MS", async () => {
    const started = performance.now()
    const decision = await storage.run(
      Effect.flatMap(Enforcement, (e) => e.check(account, request)).pipe(Effect.provide(withStore(hanging)))
    )
    expect(decision.verdict).toBe("block")
    expect(decision.reason).toContain("no answer within 100 ms")
    expect(performance.now() - started).toBeLessThan(2000)
  })

  test("decide keeps the failure typed: it never turns it into a verdict itself", async () => {
    const error = await storage.run(
      Effect.flatMap(Enforcement, (e) => e.decide(account, request)).pipe(
        Effect.flip,
        Effect.provide(withStore(failing))
      )
    )
    expect(error).toBeInstanceOf(PolicyStateUnavailable)
  })

  test("with the real store and no policy, the same check is allowed", async () => {
    const decision = await storage.run(
      Effect.flatMap(Enforcement, (e) => e.check(account, request)).pipe(Effect.provide(withStore(SqlPolicyStoreLive)))
    )
    expect(decision.verdict).toBe("allow")
  })
})

// A check answered block after its deadline has exactly one record, the block, whatever its late work did; the run's
// counters count only what was answered allow (issue 7: 9,403 records for 9,414 answered checks under overload).
describe("a fail-closed answer and the work it overtook", () => {
  /** The real store, with the decision's work slowed down before it starts or after it has stored its allow. */
  const slowed = (where: "before" | "after", ms: number, failRecords = 0) =>
    Layer.effect(
      PolicyStore,
      Effect.gen(function* () {
        const real = yield* PolicyStore
        let failures = 0
        return PolicyStore.of({
          ...real,
          decideAtomically: (...args) =>
            where === "before"
              ? Effect.zipRight(Effect.sleep(ms), real.decideAtomically(...args))
              : Effect.tap(real.decideAtomically(...args), () => Effect.sleep(ms)),
          // The first attempts to record the block fail, as when the pool cannot hand out a connection in time.
          recordFailClosed: (...args) =>
            Effect.suspend(() =>
              failures++ < failRecords
                ? Effect.fail(new PolicyStateUnavailable({ reason: "timeout exceeded when trying to connect" }))
                : real.recordFailClosed(...args)
            )
        })
      })
    ).pipe(Layer.provide(SqlPolicyStoreLive))

  const sql = (text: string, params: ReadonlyArray<unknown> = []) =>
    storage.run(Effect.flatMap(SqlClient.SqlClient, (s) => s.unsafe<any>(text, params)))
  const settled = async (runId: string) => {
    for (let i = 0; i < 100; i++) {
      const rows = await sql(
        "SELECT verdict, policy_id, reason FROM enforcement_decisions WHERE account_id = $1 AND run_id = $2",
        [account, runId]
      )
      if (rows.length > 0 && rows.every((r: any) => r.verdict === "block")) return rows
      await Bun.sleep(20)
    }
    return sql("SELECT verdict, policy_id, reason FROM enforcement_decisions WHERE account_id = $1 AND run_id = $2", [
      account,
      runId
    ])
  }
  const counters = async (runId: string) =>
    (
      await sql(
        "SELECT spent_usd::float8 AS usd, tokens::float8 AS tokens, (SELECT count(*)::int FROM enforcement_run_actions a WHERE a.account_id = r.account_id AND a.run_id = r.run_id) AS recent FROM enforcement_runs r WHERE account_id = $1 AND run_id = $2",
        [account, runId]
      )
    )[0]

  const checkWith = (store: Layer.Layer<PolicyStore, never, any>, body: Record<string, unknown>) =>
    storage.run(
      Effect.flatMap(Enforcement, (e) => e.check(account, body as any)).pipe(Effect.provide(withStore(store)))
    )

  test("an allow stored after the deadline is replaced by the block, and its counters are taken back", async () => {
    const runId = crypto.randomUUID()
    const decision = await checkWith(slowed("after", 300), {
      run_id: runId,
      proposed_usd: 0.25,
      proposed_tokens: 40,
      tool_name: "t"
    })
    expect(decision).toMatchObject({ verdict: "block", policy_id: null })
    await Bun.sleep(400) // the late work ends, then the block takes its record over
    const rows = await settled(runId)
    expect(rows).toEqual([{ verdict: "block", policy_id: null, reason: decision.reason }])
    expect(await counters(runId)).toEqual({ usd: 0, tokens: 0, recent: 0 })
  })

  test("work that had not started by the deadline stores nothing: the block is the only record", async () => {
    const runId = crypto.randomUUID()
    const decision = await checkWith(slowed("before", 200), { run_id: runId, proposed_usd: 0.5 })
    expect(decision.verdict).toBe("block")
    await Bun.sleep(400)
    expect(await settled(runId)).toEqual([{ verdict: "block", policy_id: null, reason: decision.reason }])
    expect((await counters(runId))?.usd ?? 0).toBe(0)
  })

  test("a check answered before its decision reached the store is recorded without taking its run's lock", async () => {
    const runId = crypto.randomUUID()
    const decision = await checkWith(slowed("before", 200), { run_id: runId, proposed_usd: 0.5 })
    expect(decision.verdict).toBe("block")
    await Bun.sleep(400)
    expect(await settled(runId)).toEqual([{ verdict: "block", policy_id: null, reason: decision.reason }])
    // Locking a run upserts its row: the run was never touched.
    expect(
      await sql("SELECT run_id FROM enforcement_runs WHERE account_id = $1 AND run_id = $2", [account, runId])
    ).toEqual([])
  })

  test("a late hold (the locked path) is undone entirely when the block took its record first", async () => {
    const runId = crypto.randomUUID()
    const project = crypto.randomUUID()
    await sql(
      `INSERT INTO guardrails (id, account_id, project_id, type, name, enabled, params)
       VALUES ($1, $2, $3, 'require_approval', NULL, true, '{"tool_patterns":["wire_*"]}'::jsonb)`,
      [crypto.randomUUID(), account, project]
    )
    const decision = await checkWith(slowed("before", 200), {
      run_id: runId,
      project_id: project,
      tool_name: "wire_money"
    })
    expect(decision).toMatchObject({ verdict: "block", policy_id: null })
    await Bun.sleep(400)
    expect(await settled(runId)).toEqual([{ verdict: "block", policy_id: null, reason: decision.reason }])
    expect(
      await sql("SELECT id FROM enforcement_holds WHERE account_id = $1 AND run_id = $2", [account, runId])
    ).toEqual([])
  })

  test("a block whose recording fails at first is recorded once the store answers again", async () => {
    const runId = crypto.randomUUID()
    const decision = await checkWith(slowed("before", 200, 2), { run_id: runId })
    expect(decision.verdict).toBe("block")
    expect(await settled(runId)).toEqual([{ verdict: "block", policy_id: null, reason: decision.reason }])
  })

  test("one batch of records: allows of several runs taken back, a decision never stored, a record sent twice", async () => {
    const [a, b] = [crypto.randomUUID(), crypto.randomUUID()]
    const action = (runId: string, i: number) => ({
      runId,
      proposedUsd: [0.1, 0.2, 0.3][i] ?? 1,
      proposedTokens: 10 * (i + 1),
      toolName: `tool-${i}`,
      stepIndex: i
    })
    const audit = () => ({
      decisionId: crypto.randomUUID(),
      traceId: undefined,
      startedAt: performance.now(),
      abandoned: false
    })
    const records = await storage.run(
      Effect.gen(function* () {
        const store = yield* PolicyStore
        const stored = [action(a, 0), action(a, 1), action(a, 2), action(b, 0)]
        const made: Array<{
          accountId: AccountId
          action: ReturnType<typeof action>
          audit: ReturnType<typeof audit>
          reason: string
          latencyMs: number
        }> = []
        for (const act of stored) {
          const au = audit()
          expect((yield* store.decideAtomically(account, act, [], au, null)).verdict).toBe("allow")
          made.push({ accountId: account, action: act, audit: au, reason: "late", latencyMs: 300 })
        }
        // Take back the first two allows of run a and the one of b; the third of a stays; one decision was never stored.
        const batch = [
          made[0]!,
          made[1]!,
          made[3]!,
          made[0]!,
          { accountId: account, action: action(b, 5), audit: audit(), reason: "late", latencyMs: 300 }
        ]
        yield* store.recordFailClosed(batch)
        yield* store.recordFailClosed(batch) // idempotent
        return { batch, kept: made[2]! }
      }).pipe(Effect.provide(SqlPolicyStoreLive))
    )
    const rows = await sql(
      "SELECT id, verdict, latency_ms FROM enforcement_decisions WHERE account_id = $1 AND run_id = ANY($2) ORDER BY id",
      [account, [a, b]]
    )
    const blocked = new Set(records.batch.map((r) => r.audit.decisionId))
    expect(rows).toHaveLength(5)
    for (const row of rows) expect(row.verdict).toBe(blocked.has(row.id) ? "block" : "allow")
    expect(rows.find((r: any) => r.id === records.kept.audit.decisionId).verdict).toBe("allow")
    expect(rows.filter((r: any) => blocked.has(r.id)).every((r: any) => r.latency_ms >= 300)).toBe(true)
    expect(await counters(a)).toEqual({ usd: 0.3, tokens: 30, recent: 1 })
    expect(await counters(b)).toEqual({ usd: 0, tokens: 0, recent: 0 })
  })

  test("under deadlines that many checks miss, every answer has its record and the budget counts exactly the allows", async () => {
    const runIds = Array.from({ length: 4 }, () => crypto.randomUUID())
    // Half of the checks' work is held past the 100 ms deadline (at random, before or after its write).
    const jittered = Layer.effect(
      PolicyStore,
      Effect.gen(function* () {
        const real = yield* PolicyStore
        return PolicyStore.of({
          ...real,
          decideAtomically: (...args) => {
            const r = Math.random()
            return r < 0.25
              ? Effect.zipRight(Effect.sleep(130), real.decideAtomically(...args))
              : r < 0.5
                ? Effect.tap(real.decideAtomically(...args), () => Effect.sleep(130))
                : real.decideAtomically(...args)
          }
        })
      })
    ).pipe(Layer.provide(SqlPolicyStoreLive))
    const answers = await storage.run(
      Effect.flatMap(Enforcement, (e) =>
        Effect.forEach(
          Array.from({ length: 60 }, (_, i) => ({
            run_id: runIds[i % runIds.length]!,
            proposed_usd: 0.01,
            proposed_tokens: 1,
            step_index: i
          })),
          (body) => Effect.map(e.check(account, body), (d) => ({ body, d })),
          { concurrency: 16 }
        )
      ).pipe(Effect.provide(withStore(jittered)))
    )
    expect(answers.some(({ d }) => d.policy_id === null && d.verdict === "block")).toBe(true)
    await Bun.sleep(500)
    for (const runId of runIds) {
      const mine = answers.filter(({ body }) => body.run_id === runId)
      let rows: ReadonlyArray<any> = []
      for (let i = 0; i < 100; i++) {
        rows = await sql("SELECT verdict FROM enforcement_decisions WHERE account_id = $1 AND run_id = $2", [
          account,
          runId
        ])
        if (rows.length === mine.length) break
        await Bun.sleep(20)
      }
      expect(rows.map((r) => r.verdict).sort()).toEqual(mine.map(({ d }) => d.verdict).sort())
      const allowed = mine.filter(({ d }) => d.verdict === "allow").length
      const run = await counters(runId)
      expect({ usd: Math.round((run?.usd ?? 0) * 100), tokens: run?.tokens ?? 0, recent: run?.recent ?? 0 }).toEqual({
        usd: allowed,
        tokens: allowed,
        recent: allowed
      })
    }
  }, 30_000)
})

describe("a check acting for an API key verified from the cache", () => {
  // The check's statement re-checks the key (tapedeck_require_live_key): a key revoked since this instance verified
  // it, with the notice not heard yet, gets nothing decided and nothing stored, on every path a check can take.
  test("a revoked key: CredentialRevoked and nothing stored (new run, known run, block, hold); a live key decides", async () => {
    const result = await storage.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const owner = yield* Effect.flatMap(AccountRepo, (r) => r.ensure("enforcement-cached-keys"))
        const live = `hash-live-${crypto.randomUUID()}`
        const revoked = `hash-revoked-${crypto.randomUUID()}`
        for (const [hash, at] of [
          [live, null],
          [revoked, new Date().toISOString()]
        ] as const) {
          yield* sql`INSERT INTO api_keys (id, account_id, prefix, key_hash, revoked_at)
                   VALUES (${crypto.randomUUID()}, ${owner}, 'svc_test', ${hash}, ${at}::timestamptz)`
        }
        const enforcement = yield* Enforcement
        const store = yield* PolicyStore
        const stored = Effect.map(
          sql<{ decisions: number; runs: number; spent: number | null; holds: number }>`
          SELECT (SELECT count(*)::int FROM enforcement_decisions WHERE account_id = ${owner}) AS decisions,
                 (SELECT count(*)::int FROM enforcement_runs WHERE account_id = ${owner}) AS runs,
                 (SELECT sum(spent_usd)::float8 FROM enforcement_runs WHERE account_id = ${owner}) AS spent,
                 (SELECT count(*)::int FROM enforcement_holds WHERE account_id = ${owner}) AS holds`,
          (rows) => rows[0]!
        )
        const check = (key: string, body: Record<string, unknown>) =>
          enforcement.check(owner, { run_id: "run-cached", proposed_usd: 0.5, ...body }, key).pipe(Effect.either)
        const policy = (type: string, params: unknown) =>
          sql`INSERT INTO guardrails (id, account_id, type, enabled, params)
            VALUES (${crypto.randomUUID()}, ${owner}, ${type}, true, ${JSON.stringify(params)}::jsonb)`.pipe(
            Effect.zipRight(store.invalidate(owner))
          )

        const newRun = yield* check(revoked, {})
        const afterNewRun = yield* stored
        const allowed = yield* check(live, {})
        const knownRun = yield* check(revoked, {})
        const afterKnownRun = yield* stored
        yield* policy("tool_denylist", { patterns: ["rm_*"] })
        const block = yield* check(revoked, { tool_name: "rm_rf" })
        const afterBlock = yield* stored
        yield* policy("require_approval", { tool_patterns: ["deploy"] })
        const hold = yield* check(revoked, { tool_name: "deploy" })
        const afterHold = yield* stored
        const liveHold = yield* check(live, { tool_name: "deploy" })
        return {
          newRun,
          afterNewRun,
          allowed,
          knownRun,
          afterKnownRun,
          block,
          afterBlock,
          hold,
          afterHold,
          liveHold,
          final: yield* stored
        }
      }).pipe(
        // The same store as the check's, so that invalidating its policy cache is seen.
        Effect.provide(
          Enforcement.DefaultWithoutDependencies.pipe(
            Layer.provideMerge(SqlPolicyStoreLive),
            Layer.provide([AppConfig.Default, Traces.Default])
          )
        ),
        Effect.provide(AccountRepo.Default)
      )
    )
    for (const attempt of [result.newRun, result.knownRun, result.block, result.hold]) {
      expect(attempt._tag).toBe("Left")
      if (attempt._tag === "Left") expect(attempt.left).toBeInstanceOf(CredentialRevoked)
    }
    expect(result.afterNewRun).toEqual({ decisions: 0, runs: 0, spent: null, holds: 0 })
    expect(result.allowed).toMatchObject({ _tag: "Right", right: { verdict: "allow" } })
    expect(result.afterKnownRun).toEqual({ decisions: 1, runs: 1, spent: 0.5, holds: 0 })
    expect(result.afterBlock).toEqual(result.afterKnownRun)
    expect(result.afterHold).toEqual(result.afterKnownRun)
    expect(result.liveHold).toMatchObject({ _tag: "Right", right: { verdict: "hold" } })
    expect(result.final).toMatchObject({ decisions: 2, holds: 1 })
  })
})
