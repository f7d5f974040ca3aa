import { expect, test } from "bun:test"
import { FastCheck as fc } from "effect"
import type { AccountId } from "#src/domain/Ids"
import { mapAll, spanCopyRows } from "#layers/ingest/OtlpPrepare"
import * as F from "../fixtures/otlp/GenAiFixtures.ts"

// An export's spans mapped with the memo that shares what earlier spans mapped (histories that extend the previous
// one, the same tool definitions) must be what each span mapped on its own gives, whatever the texts look like.

const ACCOUNT = "00000000-0000-4000-8000-0000000000aa" as AccountId

const words = fc.string({ unit: fc.constantFrom("a", "b", " ", "é", '"', "\\", "\n", "😀"), maxLength: 400 })
/** One OTel GenAI message: text, tool calls, tool responses, or something that is not a message at all. */
const message = fc.oneof(
  fc.record({
    role: fc.constantFrom("user", "assistant", ""),
    parts: fc.array(fc.record({ type: fc.constant("text"), content: words }), { maxLength: 2 })
  }),
  fc.record({
    role: fc.constant("assistant"),
    parts: fc.tuple(
      fc.record({ type: fc.constant("text"), content: words }),
      fc.record({
        type: fc.constant("tool_call"),
        id: fc.string({ maxLength: 8 }),
        name: fc.string({ maxLength: 8 }),
        arguments: words
      })
    )
  }),
  fc.record({
    role: fc.constant("tool"),
    parts: fc.tuple(
      fc.record({ type: fc.constant("tool_call_response"), id: fc.string({ maxLength: 8 }), response: words })
    )
  }),
  words,
  fc.integer({ min: 0, max: 9 }),
  fc.constant(null)
)
const tool = fc.record({
  type: fc.constant("function"),
  function: fc.record({ name: fc.string({ maxLength: 8 }), description: words })
})
const toolNotWhole = fc.record({ name: fc.string({ maxLength: 8 }), description: words })

/** How a span's history text relates to the previous one's. */
const historyText = (messages: ReadonlyArray<unknown>) =>
  fc.oneof(
    fc.constant(JSON.stringify(messages)),
    fc.constant(JSON.stringify(messages, null, 1)),
    fc.constant(`${JSON.stringify(messages).slice(0, -1)},]`),
    fc.constant(`${JSON.stringify(messages)} `),
    fc.constant(JSON.stringify(messages).slice(0, -3)),
    // The previous history's last number continued ("[1]" then "[1.5,2]"): not an extension of it.
    fc.constant(`${JSON.stringify(messages).slice(0, -1)}.5,2]`),
    fc.constant("[]"),
    fc.constant(` ${JSON.stringify(messages)}`)
  )

/** A conversation's model calls: each one's history a prefix of the conversation, mostly the next longer one. */
const exportSpans = fc
  .record({
    conversation: fc.array(message, { minLength: 1, maxLength: 12 }),
    cuts: fc.array(fc.nat({ max: 12 }), { minLength: 1, maxLength: 10 }),
    tools: fc.oneof(fc.array(tool, { minLength: 1, maxLength: 3 }), fc.array(toolNotWhole, { maxLength: 2 })),
    toolsVary: fc.boolean(),
    ownInput: fc.nat({ max: 6 })
  })
  .chain(({ conversation, cuts, tools, toolsVary, ownInput }) => {
    const lengths = cuts.map((c, i) => (c % 3 === 0 ? c : Math.min(conversation.length, i + 1)))
    return fc.tuple(...lengths.map((n) => historyText(conversation.slice(0, Math.max(0, n))))).map((texts) =>
      texts.map((text, i) => ({
        text,
        tools: JSON.stringify(toolsVary && i % 2 === 1 ? tools.slice(1) : tools),
        // A span whose input another attribute gives, with its own tools.
        ownInput: i === ownInput ? JSON.stringify({ messages: [], tools: tools.slice(0, 1) }) : undefined
      }))
    )
  })

const decoded = (spans: ReadonlyArray<{ text: string; tools: string; ownInput: string | undefined }>) => ({
  rejected: [],
  spans: spans.map((s, i) =>
    F.otlpSpan({
      traceId: "0123456789abcdef0123456789abcdef",
      spanId: (i + 1).toString(16).padStart(16, "0"),
      parentSpanId: "",
      name: "chat gpt-4o",
      kind: 3,
      startTimeUnixNano: String(1787220000000000000n + BigInt(i) * 1000000000n),
      endTimeUnixNano: String(1787220000500000000n + BigInt(i) * 1000000000n),
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.input.messages": s.text,
        "gen_ai.tool.definitions": s.tools,
        ...(s.ownInput === undefined ? {} : { "langfuse.observation.input": s.ownInput })
      }
    })
  )
})

test("an export's spans mapped with the memo are, byte for byte, those mapped one by one; so are their COPY rows", () => {
  fc.assert(
    fc.property(exportSpans, (spans) => {
      const alone = mapAll(ACCOUNT, decoded(spans), false)
      const reused = mapAll(ACCOUNT, decoded(spans), true)
      expect(JSON.stringify(reused.spans.map((m) => m.span))).toBe(JSON.stringify(alone.spans.map((m) => m.span)))
      expect(spanCopyRows(ACCOUNT, reused.spans).message()).toEqual(spanCopyRows(ACCOUNT, alone.spans).message())
    }),
    { numRuns: 300 }
  )
})

test("a history that extends the previous span's shares its earlier messages, frozen; the arrays are each span's own", () => {
  const conversation = [
    { role: "user", parts: [{ type: "text", content: "what is the weather" }] },
    { role: "assistant", parts: [{ type: "text", content: "looking" }] },
    { role: "user", parts: [{ type: "text", content: "thanks" }] }
  ]
  const spans = [1, 3].map((n) => ({
    text: JSON.stringify(conversation.slice(0, n)),
    tools: "[]",
    ownInput: undefined
  }))
  const [first, second] = mapAll(ACCOUNT, decoded(spans), true).spans.map((m) => m.span.input as Array<unknown>)
  expect(second![0]).toBe(first![0])
  expect(Object.isFrozen(second![0])).toBe(true)
  expect(second).not.toBe(first)
  expect(second).toHaveLength(3)
  // Without the memo (a span processor will see the spans), nothing is shared or frozen.
  const [alone1, alone2] = mapAll(ACCOUNT, decoded(spans), false).spans.map((m) => m.span.input as Array<unknown>)
  expect(alone2![0]).not.toBe(alone1![0])
  expect(Object.isFrozen(alone2![0])).toBe(false)
})
