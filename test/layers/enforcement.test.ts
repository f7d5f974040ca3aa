import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Layer } from "effect"
import { AppConfig } from "#layers/config/AppConfig"
import { Enforcement } from "#layers/enforcement/Enforcement"
import { PolicyStore } from "#layers/enforcement/PolicyStore"
import { SqlPolicyStoreLive } from "#layers/enforcement/SqlPolicyStore"
import { AccountRepo } from "#layers/storage/AccountRepo"
import { Traces } from "#layers/traces/Traces"
import { PolicyStateUnavailable } from "#src/domain/Enforcement"
import type { AccountId } from "#src/domain/Ids"
import { startTestStorage, type TestStorage } from "../support/TestStorage.ts"

// Fail-closed: whatever keeps the policy state out of reach, the verdict is block, never allow.
let storage: TestStorage
let account: AccountId
beforeAll(async () => {
  storage = await startTestStorage({ TAPEDECK_ENFORCEMENT_TIMEOUT_MS: "100" })
  account = await storage.run(Effect.flatMap(AccountRepo, (r) => r.ensure("enforcement")).pipe(Effect.provide(AccountRepo.Default)))
})
afterAll(() => storage.stop())

const withStore = <R>(store: Layer.Layer<PolicyStore, never, R>) =>
  Enforcement.DefaultWithoutDependencies.pipe(Layer.provide(store), Layer.provide([AppConfig.Default, Traces.Default]))

const failing = Layer.succeed(PolicyStore, PolicyStore.of({
  policies: () => Effect.fail(new PolicyStateUnavailable({ reason: "connection refused" })),
  decideAtomically: () => Effect.fail(new PolicyStateUnavailable({ reason: "connection refused" })),
  invalidate: () => Effect.void
}))

const hanging = Layer.succeed(PolicyStore, PolicyStore.of({
  policies: () => Effect.never,
  decideAtomically: () => Effect.never,
  invalidate: () => Effect.void
}))

const request = { run_id: "run-1", proposed_usd: 0.01 }

describe("fail-closed enforcement", () => {
  test("a store that fails: check answers block with policy_id and policy_type null", async () => {
    const decision = await storage.run(Effect.flatMap(Enforcement, (e) => e.check(account, request)).pipe(Effect.provide(withStore(failing))))
    expect(decision).toEqual({ verdict: "block", policy_id: null, policy_type: null, reason: "policy state unavailable: connection refused" })
  })

  test("a store that never answers: block after TAPEDECK_ENFORCEMENT_TIMEOUT_MS", async () => {
    const started = performance.now()
    const decision = await storage.run(Effect.flatMap(Enforcement, (e) => e.check(account, request)).pipe(Effect.provide(withStore(hanging))))
    expect(decision.verdict).toBe("block")
    expect(decision.reason).toContain("no answer within 100 ms")
    expect(performance.now() - started).toBeLessThan(2000)
  })

  test("decide keeps the failure typed: it never turns it into a verdict itself", async () => {
    const error = await storage.run(
      Effect.flatMap(Enforcement, (e) => e.decide(account, request)).pipe(Effect.flip, Effect.provide(withStore(failing)))
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
