import { describe, expect, test } from "bun:test"
import { FastCheck as fc, Schema } from "effect"
import { CreateEvalRuleRequest, isSampled, matchesFilter, samplePoint, webhookUrlProblem } from "#src/domain/EvalRule"

const subject = {
  projectId: "5b0e7a4c-6b6c-4f2f-9f54-2d3c1b0a9e11",
  name: "agent-checkout",
  status: "failed" as const,
  metadata: { env: "prod", tier: 2, beta: true },
  totalCost: "0.75"
}

describe("eval rule filters", () => {
  test("every condition must hold; an empty filter matches everything", () => {
    expect(matchesFilter({}, subject)).toBe(true)
    expect(matchesFilter({ project_id: subject.projectId as any }, subject)).toBe(true)
    expect(matchesFilter({ project_id: subject.projectId.toUpperCase() as any }, subject)).toBe(true)
    expect(matchesFilter({ project_id: crypto.randomUUID() as any }, subject)).toBe(false)
    expect(matchesFilter({ name_pattern: "agent-*" }, subject)).toBe(true)
    expect(matchesFilter({ name_pattern: "agent-?heckout" }, subject)).toBe(true)
    expect(matchesFilter({ name_pattern: "Agent-*" }, subject)).toBe(false)
    expect(matchesFilter({ name_pattern: "*" }, { ...subject, name: null })).toBe(false)
    expect(matchesFilter({ status: "failed" }, subject)).toBe(true)
    expect(matchesFilter({ status: "completed" }, subject)).toBe(false)
    expect(matchesFilter({ metadata: { env: "prod", tier: 2, beta: true } }, subject)).toBe(true)
    expect(matchesFilter({ metadata: { env: "staging" } }, subject)).toBe(false)
    expect(matchesFilter({ metadata: { tier: "2" } }, subject)).toBe(false)
    expect(matchesFilter({ metadata: { missing: null } }, subject)).toBe(false)
    expect(matchesFilter({ metadata: { env: "prod" } }, { ...subject, metadata: null })).toBe(false)
    expect(matchesFilter({ min_cost: 0.75 }, subject)).toBe(true)
    expect(matchesFilter({ min_cost: 0.76 }, subject)).toBe(false)
    expect(matchesFilter({ status: "failed", min_cost: 0.76 }, subject)).toBe(false)
  })

  test("name_pattern is user input: matching stays linear even for patterns built to backtrack", () => {
    // A regex translation (`^.*a.*a…b$`) takes hours on such a pair and freezes the instance running the job.
    const pattern = `${"*a".repeat(249)}*b`
    expect(pattern.length).toBe(500)
    expect(
      Schema.is(CreateEvalRuleRequest)({
        evaluation_id: crypto.randomUUID(),
        filter: { name_pattern: pattern },
        sampling_rate: 1,
        enabled: true
      })
    ).toBe(true)
    expect(matchesFilter({ name_pattern: pattern }, { ...subject, name: "a".repeat(500) })).toBe(false)
    expect(matchesFilter({ name_pattern: pattern }, { ...subject, name: `${"a".repeat(499)}b` })).toBe(true)
    expect(matchesFilter({ name_pattern: "*a*a*a*a*a*a*a*a*b" }, { ...subject, name: "a".repeat(60) })).toBe(false)
  })

  test("the request is strict and validates the webhook URL", () => {
    const decode = Schema.decodeUnknownEither(CreateEvalRuleRequest)
    const evaluation_id = crypto.randomUUID()
    expect(decode({ evaluation_id })._tag).toBe("Right")
    const ok = decode({ evaluation_id })
    if (ok._tag === "Right") expect(ok.right).toMatchObject({ sampling_rate: 1, enabled: true, filter: {} })
    for (const bad of [
      {},
      { evaluation_id, colour: 1 },
      { evaluation_id, sampling_rate: 1.01 },
      { evaluation_id, sampling_rate: -0.1 },
      { evaluation_id, filter: { status: "running" } },
      { evaluation_id, filter: { unknown: 1 } },
      { evaluation_id, filter: { metadata: { k: { nested: true } } } },
      { evaluation_id, filter: { min_cost: -1 } },
      // JSON.parse makes "__proto__" an own key; decoding would drop it silently and widen the filter.
      JSON.parse(`{"evaluation_id":"${evaluation_id}","filter":{"metadata":{"__proto__":"x","env":"prod"}}}`),
      { evaluation_id, webhook_url: "http://hooks.example.com/x" },
      { evaluation_id, webhook_url: "ftp://hooks.example.com/x" },
      { evaluation_id, webhook_url: "https://user:pw@hooks.example.com/x" },
      { evaluation_id, webhook_url: "hooks.example.com/x" }
    ]) {
      expect(decode(bad)._tag).toBe("Left")
    }
    expect(webhookUrlProblem("https://hooks.example.com/x?y=1")).toBeUndefined()
    expect(webhookUrlProblem("http://hooks.example.com/x")).toBe("must be an https URL")
  })
})

describe("sampling", () => {
  const uuid = fc.uuid()

  test("property: the decision is a function of (rule, trace): a retried job decides the same", () => {
    fc.assert(
      fc.property(uuid, uuid, fc.double({ min: 0, max: 1, noNaN: true }), (rule, trace, rate) => {
        expect(isSampled(rate, rule, trace)).toBe(isSampled(rate, rule, trace))
        expect(isSampled(rate, rule.toUpperCase(), trace.toUpperCase())).toBe(isSampled(rate, rule, trace))
        const point = samplePoint(rule, trace)
        expect(point).toBeGreaterThanOrEqual(0)
        expect(point).toBeLessThan(1)
      }),
      { numRuns: 1000 }
    )
  })

  test("property: rate 0 never samples, rate 1 always does, and a higher rate keeps every trace a lower one took", () => {
    fc.assert(
      fc.property(
        uuid,
        uuid,
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (rule, trace, a, b) => {
          expect(isSampled(0, rule, trace)).toBe(false)
          expect(isSampled(1, rule, trace)).toBe(true)
          const [low, high] = a <= b ? [a, b] : [b, a]
          if (isSampled(low, rule, trace)) expect(isSampled(high, rule, trace)).toBe(true)
        }
      ),
      { numRuns: 1000 }
    )
  })

  test("about `rate` of the traces are sampled", () => {
    const rule = crypto.randomUUID()
    for (const rate of [0.1, 0.5, 0.9]) {
      let taken = 0
      for (let i = 0; i < 20_000; i++) if (isSampled(rate, rule, crypto.randomUUID())) taken++
      expect(Math.abs(taken / 20_000 - rate)).toBeLessThan(0.02)
    }
  })
})
