import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { readDecision, readHold } from "../../../src/ui/app/pages/enforcement/holds.ts"

describe("holds and decisions as listed", () => {
  test("a hold row as the API lists it is read field for field", () => {
    expect(
      readHold({
        id: "h1",
        policyId: "p1",
        runId: "run-1",
        toolName: "send_email",
        toolArgsHash: "abc",
        model: null,
        status: "pending",
        reason: "needs approval",
        decidedBy: null,
        consumed: false,
        expiresAt: "2026-01-01T00:05:00.000Z",
        createdAt: "2026-01-01T00:00:00.000Z",
        decidedAt: null
      })
    ).toEqual({
      id: "h1",
      runId: "run-1",
      toolName: "send_email",
      model: null,
      toolArgsHash: "abc",
      status: "pending",
      reason: "needs approval",
      expiresAt: "2026-01-01T00:05:00.000Z",
      createdAt: "2026-01-01T00:00:00.000Z"
    })
  })

  test("any object is read without throwing; one without an id or run is skipped", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (item) => {
        const hold = readHold(item)
        if (typeof item.id !== "string" || typeof item.runId !== "string") expect(hold).toBeUndefined()
        else expect(hold?.id).toBe(item.id)
        const decision = readDecision(item)
        if (decision !== undefined) expect(typeof decision.verdict).toBe("string")
      })
    )
  })

  test("a decision keeps its verdict, latency and trace", () => {
    expect(
      readDecision({
        id: "d1",
        run_id: "run-1",
        trace_id: "t1",
        verdict: "hold",
        policy_type: "require_approval",
        reason: "r",
        latency_ms: 1.25,
        created_at: "x"
      })
    ).toMatchObject({ verdict: "hold", latencyMs: 1.25, traceId: "t1", policyType: "require_approval" })
  })
})
