import { describe, expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import { finalizeTrace, type StoredSpan } from "#layers/ingest/TraceFinalize"

/** A stored span of one trace: the mapped shape finalize reads (ids are plain strings here). */
const span = (
  id: string,
  parent: string | null,
  type: StoredSpan["span_type"],
  over: Partial<StoredSpan> = {}
): StoredSpan =>
  ({
    id,
    parent_id: parent,
    span_type: type,
    name: id,
    metadata: { otel: parent === null ? { root: true } : {} },
    started_at: "2026-08-20T10:00:00.000Z",
    ...over
  }) as StoredSpan

const call = { id: "call_0", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } }

const json = fc.jsonValue({ maxDepth: 2 })
const message = fc.record({
  role: fc.constantFrom("system", "user", "assistant", "tool"),
  content: fc.string({ maxLength: 20 })
})

describe("finalize: a model call takes its request and tool calls from the step that wraps it (Mastra model_step)", () => {
  test("in any arrival order, a call without input gets its step's input; with tool calls on the step, its answer too", () => {
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 5 }), fc.boolean(), (messages, stepCallsTool) => {
        const stepOutput = stepCallsTool ? { role: "assistant", content: null, tool_calls: [call] } : "done"
        const spans = [
          span("run", null, "action"),
          span("step", "run", "action", {
            input: messages,
            output: stepOutput,
            metadata: { otel: {}, model_step: true }
          }),
          span("chat", "step", "llm_call", { output: { role: "assistant", content: "", finish_reason: "tool-calls" } })
        ]
        for (const order of [spans, [...spans].reverse()]) {
          const u = finalizeTrace(order).spanUpdates.find((x) => x.id === "chat")
          expect(u?.input).toEqual(messages)
          expect(u?.output).toEqual(
            stepCallsTool
              ? { role: "assistant", content: null, tool_calls: [call], finish_reason: "tool-calls" }
              : undefined
          )
        }
      })
    )
  })

  test("a call's own input and tool calls are kept, and only a flagged step lends its payloads", () => {
    fc.assert(
      fc.property(json, json, (own, stepInput) => {
        const ownOutput = { role: "assistant", content: null, tool_calls: [{ ...call, id: "own" }] }
        const spans = [
          span("step", null, "action", {
            input: stepInput,
            output: { role: "assistant", tool_calls: [call] },
            metadata: { otel: { root: true }, model_step: true }
          }),
          span("chat", "step", "llm_call", { input: own, output: ownOutput }),
          span("plain", null, "action", { input: stepInput, output: { role: "assistant", tool_calls: [call] } }),
          span("other", "plain", "llm_call")
        ]
        const updates = finalizeTrace(spans).spanUpdates
        const chat = updates.find((x) => x.id === "chat")
        expect(chat?.input).toBeUndefined()
        expect(chat?.output).toBeUndefined()
        const other = updates.find((x) => x.id === "other")
        expect([other?.input, other?.output]).toEqual([undefined, undefined])
      })
    )
  })
})
